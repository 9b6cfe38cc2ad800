// memaudit dashboard: live progress over Server-Sent Events. Charts are inline SVG drawn on the server
// (app/ui/charts.py), so they need no script. Loaded from /ui/static only (strict CSP).
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

document.addEventListener("DOMContentLoaded", () => {
  liveProgress();
});
