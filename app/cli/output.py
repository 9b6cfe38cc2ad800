"""What the command line prints: quiet logging that never tears a progress bar, and an audit's progress.

By default only memaudit's own one-line notices (the model-load line) and warnings are printed; libraries (alembic,
transformers, sentence-transformers, httpx) say nothing and draw no bars. ``-v`` prints every INFO record with its
logger name and time, tracebacks included, and lets libraries draw their bars again.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from tqdm import tqdm

from app.cli.client import Client
from app.db.vocabulary import FINAL_STATUSES, AuditStatus
from app.errors import DomainError
from core.measures.null import null_eta_seconds

POLL_SECONDS = 0.5
FACTS_POLL_SECONDS = 5.0  # a key that cannot read the null audit reads the facts page this often
RATE_WINDOW_SECONDS = 20.0  # the rate is measured over this recent window, not since the start
PLAIN_EVERY_SECONDS = 10.0  # without a terminal (CI logs): one progress line this often
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} sentences{postfix}"
LIBRARIES = ("transformers", "alembic", "sentence_transformers")  # in a service's log: warnings only
NOTICES = ("workers.lm.loading",)  # loggers whose INFO lines a user wants by default (model ready in N s)


class BarSafeHandler(logging.Handler):
    """Writes through tqdm, which clears the progress bar, prints the line and redraws the bar under it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:
            self.handleError(record)


class QuietFormatter(logging.Formatter):
    """The message alone ("warning: " before warnings), no traceback: failures are reported in one line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            message = f"{record.levelname.lower()}: {message}"
        if record.exc_info:
            message += " (run with -v for the traceback)"
        return message


def setup_logging(verbose: bool, service: bool = False) -> None:
    """Quiet for one-shot commands; a long-running service (`serve`, `worker`) logs every INFO record with its time,
    libraries at WARNING (its log is what an operator reads: which audit started, succeeded or failed)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, BarSafeHandler)]:  # an earlier main() in this process
        root.removeHandler(old)
    handler = BarSafeHandler()
    for name in (*LIBRARIES, *NOTICES, "memaudit.jobs"):  # levels an earlier call in this process may have set
        logging.getLogger(name).setLevel(logging.NOTSET)
    if verbose or service:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.INFO)
        # one line per HTTP request would bury everything else
        for name in ("httpx", "urllib3", *(() if verbose else LIBRARIES)):
            logging.getLogger(name).setLevel(logging.WARNING)
    else:
        handler.setFormatter(QuietFormatter())
        root.setLevel(logging.WARNING)
        for name in NOTICES:
            logging.getLogger(name).setLevel(logging.INFO)
        # an audit's failure is printed once, by the command that waits for it
        logging.getLogger("memaudit.jobs").setLevel(logging.CRITICAL)
    root.addHandler(handler)


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class AuditProgress:
    """The progress of one audit as its job reports it. The bar appears once scoring has started (an audit that
    fails before draws none); sentences found in the NLL cache are shown done but left out of the rate."""

    def __init__(self, label: str, quiet: bool = False) -> None:
        self.label, self.quiet = label, quiet
        self.bar: tqdm | None = None
        self.samples: deque[tuple[float, int]] = deque()
        self.last_plain = 0.0
        self.tty = sys.stderr.isatty()

    def rate(self) -> float | None:
        """Sentences per second between the changes of the last RATE_WINDOW_SECONDS (at least the last two changes:
        progress arrives in steps, one per engine batch). None until scoring has moved twice."""
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 - t0 >= 1.0 and d1 > d0 else None

    def update(self, audit: dict[str, Any], now: float | None = None) -> None:
        done, total = audit["progress"]["done"], audit["progress"]["total"]
        if self.quiet or not total or audit["status"] != AuditStatus.RUNNING:
            return
        now = time.monotonic() if now is None else now
        if self.bar is None:
            self.bar = tqdm(
                total=total, initial=done, desc=self.label, file=sys.stderr, disable=not self.tty, bar_format=BAR_FORMAT
            )
        if not self.samples or done != self.samples[-1][1]:  # the first sample is the base: cached sentences
            self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] > RATE_WINDOW_SECONDS:
            self.samples.popleft()
        rate = self.rate()
        note = f"{rate:,.0f} sentences/s, {duration((total - done) / rate)} left" if rate else "measuring the rate"
        self.bar.total, self.bar.n = total, done
        self.bar.set_postfix_str(note, refresh=True)
        if not self.tty and now - self.last_plain >= PLAIN_EVERY_SECONDS:
            self.last_plain = now
            tqdm.write(
                f"{self.label}: {done:,}/{total:,} sentences ({100 * done / total:.0f} %), {note}", file=sys.stderr
            )

    def close(self, audit: dict[str, Any]) -> None:
        if self.bar is None:
            return
        if audit["status"] == AuditStatus.SUCCEEDED:
            self.bar.n = self.bar.total
            self.bar.set_postfix_str("done", refresh=True)
            self.bar.close()
        else:  # the one-line failure replaces the bar
            self.bar.leave = False
            self.bar.close()


def wait(client: Client, audit_id: str, label: str, quiet: bool = False) -> dict[str, Any]:
    """Poll until the audit ends, showing its progress. Ctrl-C cancels the audit and re-raises."""
    progress = AuditProgress(label, quiet)
    audit: dict[str, Any] = {"status": AuditStatus.RUNNING}
    try:
        while True:
            audit = client.audit(audit_id)
            if audit["status"] in FINAL_STATUSES:
                return audit
            progress.update(audit)
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        audit = {"status": AuditStatus.CANCELLED}
        with contextlib.suppress(DomainError):  # it may have ended meanwhile
            client.cancel(audit_id)
        raise
    finally:
        progress.close(audit)


NULL_WAIT_SECONDS = 600  # `--null-wait`'s default: how long a command waits for the null its p-values need


def pending_nulls(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in (facts.get("calibration") or {}).get("nulls", []) if n["status"] == "pending"]


def null_eta(nulls: list[dict[str, Any]]) -> tuple[int, int, float | None]:
    """(done, total) sentences of the pending nulls (one null audit may serve several properties: counted once)
    and the time left at their measured rate (None until they have scored something)."""
    by_audit = {n["null_audit_id"]: n.get("progress") or {} for n in nulls}
    done = sum(p.get("done", 0) for p in by_audit.values())
    total = sum(p.get("total", 0) for p in by_audit.values())
    etas = [p["eta_seconds"] for p in by_audit.values() if p.get("eta_seconds") is not None]
    return done, total, max(etas) if etas else None


def _null_progress(audit: dict[str, Any]) -> dict[str, Any]:
    """A null audit's progress and time left, as the facts page computes it (app.nulls.calibrate.null_progress)."""
    done, total, elapsed = audit["progress"]["done"], audit["progress"]["total"], None
    if audit.get("started_at"):
        started = datetime.fromisoformat(audit["started_at"])
        elapsed = (datetime.now(UTC) - (started if started.tzinfo else started.replace(tzinfo=UTC))).total_seconds()
    cost = (audit.get("summary") or {}).get("cost")
    return {"done": done, "total": total, "eta_seconds": null_eta_seconds(done, total, elapsed, cost)}


def _pending_now(client: Client, audit_id: str, nulls: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The nulls still pending, read from the null audits themselves (the facts page, personal data whose every read
    the access log records, is read once at the end); None where this key may not read them (an auditor's key on a
    remote API: the service's own audits are not its)."""
    try:
        audits = [client.audit(i) for i in {n["null_audit_id"] for n in nulls}]
    except DomainError:
        return None
    return [
        {"null_audit_id": a["id"], "progress": _null_progress(a)} for a in audits if a["status"] not in FINAL_STATUSES
    ]


def wait_for_nulls(client: Client, audit_id: str, limit: float, quiet: bool = False) -> dict[str, Any]:
    """The audit's facts page once the nulls its p-values wait for are done, with a progress bar. The null's rate is
    measured on its first part, then how long it takes is said before waiting; longer than ``limit`` seconds, or
    not done by then: the page as it is. The null goes on under `memaudit serve` or a worker, or in the next
    command, from what it has stored (a one-shot command hands it back to the queue as it exits:
    app.queue.EmbeddedDispatcher.shutdown)."""
    facts = client.facts(audit_id)
    nulls = pending_nulls(facts)
    if not nulls:
        return facts
    say = (lambda _: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    done, total, eta = null_eta(nulls)
    later = "it goes on under `memaudit serve`, a worker or the next command, from what it has stored"
    head = f"p-values need this configuration's null (fictitious people audited alike): {total - done:,} sentences"
    if limit <= 0:
        say(f"{head}; not waiting (--null-wait 0): {later}")
        return facts
    say(f"{head}; measuring its rate")
    client.run_queued_work()  # a null an earlier command handed back goes on here
    bar = tqdm(
        total=max(total, 1), initial=done, desc="null", file=sys.stderr, disable=quiet or not sys.stderr.isatty()
    )
    deadline, said = time.monotonic() + limit, False
    try:
        while nulls and time.monotonic() < deadline:
            pending = _pending_now(client, audit_id, nulls)
            if pending is None:  # read through the facts page, less often
                time.sleep(FACTS_POLL_SECONDS)
                pending = pending_nulls(client.facts(audit_id))
            else:
                time.sleep(POLL_SECONDS)
            nulls = pending
            done, total, eta = null_eta(nulls)
            bar.total, bar.n = max(total, 1), done
            bar.set_postfix_str(f"{duration(eta)} left" if eta is not None else "measuring", refresh=True)
            if nulls and eta is not None and not said:
                said = True
                if eta > deadline - time.monotonic():
                    say(f"the null takes ≈ {duration(eta)} more: longer than --null-wait; not waiting: {later}")
                    break
                say(f"the null takes ≈ {duration(eta)}: waiting")
    finally:
        bar.close()
    if nulls and said and time.monotonic() >= deadline:
        say(f"the null is not done after --null-wait {duration(limit)}: {later}")
    return client.facts(audit_id)


def null_source_line(facts: dict[str, Any]) -> str | None:
    """Where the p-values' null came from when it was not computed here: shipped with memaudit, or imported."""
    sources = {n.get("source") for n in (facts.get("calibration") or {}).get("nulls", []) if n["status"] == "ready"}
    if "shipped" in sources:
        return (
            "p-values against the null shipped with memaudit for this model and configuration (fictitious people,"
            ' built by memaudit nulls ship; docs/nulls.md, "Shipped nulls and null artifacts")'
        )
    if "imported" in sources:
        return "p-values against an imported null (memaudit nulls import)"
    return None


def failure_line(audit: dict[str, Any], local: bool) -> str:
    """One line saying how an audit ended, with its recorded reason."""
    reason = audit.get("error") or ""
    if local and reason.startswith("internal error"):
        reason = reason.replace("see the worker log", "run again with -v to see the traceback")
    return f"audit {audit['id']} {audit['status']}" + (f": {reason}" if reason else "")
