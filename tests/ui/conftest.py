"""The dashboard in a real browser: Debian's chromium driven by Playwright (nothing is downloaded), against a live
uvicorn on loopback with the test Postgres, Redis and a real RQ worker process. One server, one worker and one set
of finished audits per module (starting them costs more than the tests).

Screenshots of each page kind go to a temporary directory, or to ``$UI_SCREENSHOTS`` when set
(``UI_SCREENSHOTS=docs/img pytest tests/ui`` refreshes the README's images)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.settings import GROUNDTRUTH_DIR
from tests.conftest import REPO, _reset_caches, make_key, migrated_database, start_worker, stop_worker, wait_for
from tests.support import zygote
from tests.support.live import LiveApi, start_api

MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"
ROLES = ("admin", "auditor", "regulator", "pipeline")
__all__ = [
    "GROUNDTRUTH_DIR",
    "Stack",
    "assert_no_label_clipped",
    "finish",
    "other_kinds",
    "shoot",
    "sign_in",
    "trained_person",
]


@dataclass
class Stack:
    api: LiveApi
    keys: dict[str, str]
    shots: Path
    worker: zygote.Process
    audits: dict[str, str] = field(default_factory=dict)  # kind -> a finished audit of it

    def client(self, role: str):  # noqa: ANN201
        return self.api.client(self.keys[role])

    @contextmanager
    def worker_paused(self) -> Iterator[None]:
        """The worker stopped (SIGSTOP) for the block: what it has not finished stays unfinished while a test
        looks, however fast or slow the machine is; it resumes (SIGCONT) where it stopped."""
        self.worker.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.worker.send_signal(signal.SIGCONT)


@pytest.fixture(scope="module")
def stack(postgres, redis_server, tmp_path_factory: pytest.TempPathFactory, request) -> Iterator[Stack]:  # noqa: ANN001
    # its own database: the worker's reconciler would otherwise run what earlier tests left queued there first
    env = {
        "MEMAUDIT_DATABASE_URL": migrated_database(postgres, "ui"),
        "MEMAUDIT_REDIS_URL": redis_server.url,
        "MEMAUDIT_QUEUE_NAME": f"ui-{uuid.uuid4().hex[:6]}",
        "MEMAUDIT_ENV": "test",
        "MEMAUDIT_TORCH_THREADS": "1",
        # a small calibration null (fictitious people), queued when a subject audit's results are first read
        "MEMAUDIT_NULL_MIN_PEOPLE": "2",
        "MEMAUDIT_NULL_MAX_PEOPLE": "3",
        "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "3",
    }
    env |= getattr(request.module, "STACK_ENV", {})  # a module's own settings (e.g. a null large enough for p ≤ 0.01)
    logs = tmp_path_factory.mktemp("ui-servers")
    shots = Path(os.environ.get("UI_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        _reset_caches()
        worker = start_worker(env, logs / "worker.log")
        api = start_api(env, logs / "api.log")
        keys = {role: make_key(role) for role in ROLES} | {"other_auditor": make_key("auditor")}
        try:
            yield Stack(api, keys, shots, worker)
        finally:
            api.stop()
            stop_worker(worker)  # not RQ's warm shutdown: it finished the null chunk it ran, which no test reads
            _reset_caches()


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    assert executable, "install Debian's chromium package (apt-get install chromium); .ci/run does"
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's sandbox cannot start
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


def sign_in(browser, stack: Stack, token: str, path: str = "/ui/audits"):  # noqa: ANN001, ANN201
    """A fresh browser context (its own cookies) signed in with ``token`` through the sign-in form."""
    context = browser.new_context(
        base_url=stack.api.url, viewport={"width": 1280, "height": 800}, accept_downloads=True
    )
    page = context.new_page()
    page.goto(path)
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def shoot(page, stack: Stack, name: str) -> None:  # noqa: ANN001
    """A screenshot of the viewport, stored as a 128-colour PNG (a third of the size; the README shows them)."""
    from PIL import Image

    path = stack.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    Image.open(path).convert("RGB").quantize(colors=128).save(path, optimize=True)


def trained_person() -> dict:
    return json.loads(MANIFEST.read_text())["trained"][0]


def other_kinds(stack: Stack, workdir: Path) -> dict[str, str]:
    """A small finished audit of each kind the dashboard cannot submit (over the JSON API, as clients do)."""
    from scripts.train_items_model import MODEL_DIR, default_catalog

    api, ids = stack.client("auditor"), {}
    grid = {
        "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
        "vocab_size": 16,
        "seq_len": 8,
        "dataset_sizes": [8, 32, 128],
        "seeds": [0],
        "precisions": ["fp32"],
    }
    options = {"steps": 60, "lr": 3e-2, "warmup_steps": 5, "checkpoint_seconds": 1.0}
    body = {"kind": "capacity", "model": "scratch", "grid": grid, "options": options}
    ids["capacity"] = api.post("/audits", json=body).json()["id"]
    paths = default_catalog().write(workdir)
    files = {t: (p.name, p.read_bytes(), "application/octet-stream") for t, p in paths.items()}
    dataset = api.post("/datasets", data={"name": "synthetic catalog"}, files=files).json()["id"]
    body = {
        "kind": "coverage",
        "model": f"hf:{MODEL_DIR}",
        "dataset_id": dataset,
        "target": "items",
        "options": {"sample": 40},
    }
    r = api.post("/audits", json=body)
    assert r.status_code == 202, (r.status_code, r.text)
    ids["coverage"] = r.json()["id"]
    strings = [
        {"id": f"s{i}", "text": "abcdefabcdef"[i % 6 :][:8] + str(i), "count": 1 + (i % 3 == 0)} for i in range(12)
    ]
    options = {"folds": 2, "epochs": 3, "d_model": 16, "n_layer": 1, "n_head": 2, "batch_size": 8, "lr": 1e-2}
    body = {"kind": "dynamics", "model": "groundtruth-tiny", "strings": strings, "options": options}
    ids["dynamics"] = api.post("/audits", json=body).json()["id"]
    return ids


def finish(stack: Stack, ids: dict[str, str]) -> None:
    api = stack.client("admin")
    for kind, audit_id in ids.items():
        done = wait_for(api, audit_id, timeout=300)
        assert done["status"] == "succeeded", (kind, done)


CHART_TEXTS = """svg => ({view: [svg.viewBox.baseVal.width, svg.viewBox.baseVal.height],
  texts: [...svg.querySelectorAll('text')].map(t => { const b = t.getBBox(); return {text: t.textContent,
    cls: t.getAttribute('class') || '', x: b.x, y: b.y, w: b.width, h: b.height,
    rotated: t.hasAttribute('transform')}; }),
  rotated: [...svg.querySelectorAll('text[transform]')].map(t => { const b = t.getBoundingClientRect();
    const s = svg.getBoundingClientRect(); return [b.left - s.left, b.top - s.top, b.right - s.left,
    b.bottom - s.top, s.width, s.height]; })})"""


def number(label: str) -> float:
    """A tick label or table cell as a number: "12,000" -> 12000, "40%" -> 0.4."""
    text = label.strip().replace(",", "")
    return float(text.rstrip("%")) / (100 if text.endswith("%") else 1)


def assert_no_label_clipped(page, what: str, data_columns: dict[int, tuple[int, ...]] | None = None) -> None:  # noqa: ANN001
    """Every text of every chart lies inside the chart's viewBox (rotated titles: inside the drawn chart), so no
    label is cut ("12,000" cannot show as "2,000"); tick labels on one axis do not overlap; and where
    ``data_columns`` names, per chart, the table columns it plots, the top y label is at least their largest
    number (the axis says what it covers)."""
    charts = page.locator("svg.chart")
    assert charts.count() >= 1, what
    for i in range(charts.count()):
        chart = charts.nth(i)
        box = chart.evaluate(CHART_TEXTS)
        width, height = box["view"]
        assert box["texts"], (what, i)
        for t in box["texts"]:
            assert t["w"] > 0 and t["text"].strip(), (what, i, t)
            if not t["rotated"]:
                x, y, w, h = t["x"], t["y"], t["w"], t["h"]
                assert x >= 0 and y >= 0 and x + w <= width and y + h <= height, (what, i, t, box["view"])
        for left, top, right, bottom, w, h in box["rotated"]:
            assert left >= 0 and top >= 0 and right <= w + 0.5 and bottom <= h + 0.5, (what, i, "axis title")
        xs = sorted((t for t in box["texts"] if t["cls"] == "tick x"), key=lambda t: (round(t["y"]), t["x"]))
        for a, b in zip(xs, xs[1:], strict=False):
            if abs(a["y"] - b["y"]) < 1:  # labels on one line
                assert a["x"] + a["w"] <= b["x"], (what, i, a, b)
        ys = sorted((t for t in box["texts"] if t["cls"] == "tick y"), key=lambda t: t["y"])
        for a, b in zip(ys, ys[1:], strict=False):
            assert a["y"] + a["h"] <= b["y"] + 0.5, (what, i, a, b)
        if data_columns and i in data_columns:
            rows = chart.locator("xpath=following-sibling::table[1]").locator("tbody tr")
            values = [
                number(rows.nth(r).locator("td").nth(c).inner_text())
                for r in range(min(rows.count(), 50))
                for c in data_columns[i]
            ]
            top = max(number(t["text"]) for t in ys)
            assert top >= max(values), (what, i, [t["text"] for t in ys], max(values))


def goto_settled(page, url: str, tries: int = 3) -> None:  # noqa: ANN001
    """page.goto, again where the page's own reload aborted the navigation (a page that follows a running audit
    reloads itself when its event stream ends: app/ui/static/ui.js)."""
    for attempt in range(tries):
        try:
            page.goto(url)
            return
        except Exception as exc:  # playwright's Error when another navigation began: net::ERR_ABORTED, or
            # "is interrupted by another navigation" (which one depends on when the page's reload starts)
            if not any(m in str(exc) for m in ("ERR_ABORTED", "interrupted by another navigation")) or (
                attempt == tries - 1
            ):
                raise
            page.wait_for_timeout(500)
