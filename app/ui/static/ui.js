// memaudit dashboard: live progress over Server-Sent Events, and charts drawn from the tables of numbers beside
// them (the table stays: it is the accessible form of the chart). Loaded from /ui/static only (strict CSP).
"use strict";

function liveProgress() {
  const live = document.getElementById("live");
  if (!live || !live.dataset.events || !window.EventSource) return;
  const bar = live.querySelector("progress");
  const text = live.querySelector(".progress-text");
  const status = document.getElementById("status");
  const source = new EventSource(live.dataset.events);
  source.addEventListener("progress", (e) => {
    const a = JSON.parse(e.data);
    bar.max = a.progress.total || 1;
    bar.value = a.progress.total ? a.progress.done : 0;
    text.textContent = a.progress.done + " / " + a.progress.total;
    status.textContent = a.status;
    status.className = "status status-" + a.status;
  });
  source.addEventListener("end", () => { source.close(); window.location.reload(); });
  source.addEventListener("gone", () => source.close());
}

function tableData(table) {
  const heads = [...table.querySelectorAll("thead th")];
  const seriesCols = heads.map((th, i) => (th.hasAttribute("data-series") ? i : -1)).filter((i) => i >= 0);
  const xs = [], ys = seriesCols.map(() => []);
  for (const row of table.querySelectorAll("tbody tr")) {
    const cells = row.children;
    const x = parseFloat(cells[0].textContent);
    if (Number.isNaN(x)) continue;
    xs.push(x);
    seriesCols.forEach((col, k) => {
      const y = parseFloat(cells[col].dataset.y ?? cells[col].textContent);
      ys[k].push(Number.isNaN(y) ? null : y);
    });
  }
  return { names: seriesCols.map((i) => heads[i].textContent.trim()), xs, ys };
}

const COLORS = ["#1f5fbf", "#c0392b", "#19733a", "#8e44ad", "#d35400"];

function drawChart(holder) {
  const table = document.getElementById(holder.dataset.for);
  if (!table || !window.uPlot) return;
  const { names, xs, ys } = tableData(table);
  if (xs.length === 0) return;
  const bars = table.dataset.chart === "bars";
  const series = [{ label: table.dataset.x || "x" }].concat(names.map((name, k) => ({
    label: name, stroke: COLORS[k % COLORS.length], width: 2,
    fill: bars ? COLORS[k % COLORS.length] + "99" : undefined,
    paths: bars ? uPlot.paths.bars({ size: [0.6, 60] }) : undefined,
    points: { show: !bars }, spanGaps: true,
  })));
  const width = Math.min(720, holder.parentElement.clientWidth || 720);
  const top = Math.max(...ys.flat().filter((y) => y !== null), 0);
  const scales = bars  // bars start at zero, with half a bar of room on each side
    ? { x: { time: false, range: [Math.min(...xs) - 0.5, Math.max(...xs) + 0.5] }, y: { range: [0, top * 1.1 || 1] } }
    : { x: { time: false } };
  const opts = { width, height: 260, series, scales,
    axes: [{ label: table.dataset.x || "" }, {}] };
  holder.setAttribute("role", "img");
  holder.setAttribute("aria-label", "chart of the table below: " + (table.caption ? table.caption.textContent : ""));
  new uPlot(opts, [xs, ...ys], holder);
}

document.addEventListener("DOMContentLoaded", () => {
  liveProgress();
  document.querySelectorAll(".chart[data-for]").forEach(drawChart);
});
