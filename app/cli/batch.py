"""`memaudit batch submit ROSTER` (a CSV or JSON-lines file): one subject audit per person and model, with a
progress bar over the whole batch; `memaudit batch status ID` and `memaudit batch report ID`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.cli.audit import add_audit_options, audit_options
from app.cli.client import ApiRefused, Client, add_client_arguments, make_client
from app.cli.output import PLAIN_EVERY_SECONDS, POLL_SECONDS, duration
from app.db.vocabulary import FINAL_STATUSES, AuditStatus
from app.settings import get_settings

BATCH_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} audits{postfix}"


def _print_rejected(errors: list[dict[str, Any]]) -> None:
    for e in errors:
        print(f"  row {e['row']}: {e['field']}: {e['message']}", file=sys.stderr)


def cmd_batch_submit(args: argparse.Namespace) -> int:
    client = make_client(args)
    options = audit_options(args)
    models = [args.model or get_settings().default_model, *args.compare]
    try:
        batch = client.submit_batch(Path(args.roster), models, options, args.partial)
    except ApiRefused as exc:  # a rejected roster: the API's 422 lists its rows
        if not exc.rows:
            raise
        print(f"memaudit: {exc.message}", file=sys.stderr)
        _print_rejected(exc.rows)
        return 2
    if batch.get("errors"):
        print(f"{batch['rejected']} rows left out (--partial):", file=sys.stderr)
        _print_rejected(batch["errors"])
    print(
        f"batch {batch['id']}: {batch['people']} people x {len(batch['models'])} models on {client.where}",
        file=sys.stderr,
    )
    if args.no_wait:
        print(json.dumps(batch))
        return 0
    try:
        batch = wait_batch(client, batch["id"])
    except KeyboardInterrupt:
        print(
            f"memaudit: stopped waiting; batch {batch['id']} goes on (`memaudit batch status {batch['id']}`; "
            f"DELETE /batches/{batch['id']} cancels it)",
            file=sys.stderr,
        )
        return 130
    if args.report:  # the tables, as `memaudit batch report` prints them (--json: the report's JSON)
        report = client.batch(batch["id"], "report")
        print(json.dumps(report) if args.json else report_text(batch, report))
    else:
        print(json.dumps(batch))
    return 0 if batch["progress"][AuditStatus.FAILED] == 0 else 1


def wait_batch(client: Client, batch_id: str) -> dict[str, Any]:
    """Poll until no audit of the batch is queued or running; one bar over all its audits. Ctrl-C stops waiting,
    not the batch (``DELETE /batches/{id}`` cancels it)."""
    batch = client.batch(batch_id)
    tty, last_plain = sys.stderr.isatty(), 0.0
    bar = tqdm(
        total=batch["progress"]["total"],
        desc=f"batch {batch_id[:8]}",
        file=sys.stderr,
        bar_format=BATCH_BAR,
        mininterval=1.0,
        disable=not tty,  # redirected (a log file, CI): one plain line every PLAIN_EVERY_SECONDS instead of frames
    )
    try:
        while True:
            p = batch["progress"]
            bar.n = sum(p[status] for status in FINAL_STATUSES)
            eta = f", {duration(batch['eta_seconds'])} left" if batch.get("eta_seconds") else ""
            bar.set_postfix_str(f"{p['running']} running, {p['failed']} failed{eta}", refresh=True)
            done = batch["status"] in ("finished", "cancelled")
            if not tty and (done or time.monotonic() - last_plain >= PLAIN_EVERY_SECONDS):  # and the last state
                last_plain = time.monotonic()
                print(
                    f"batch {batch_id[:8]}: {bar.n}/{p['total']} audits, {p['running']} running, {p['failed']} failed"
                    f"{eta}",
                    file=sys.stderr,
                    flush=True,
                )
            if done:
                return batch
            time.sleep(POLL_SECONDS)
            batch = client.batch(batch_id)
    finally:
        bar.close()


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _num(x: Any) -> str:
    return "–" if x is None else f"{x:.2f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain text table: columns padded to their widest cell, the first left-aligned, the others right."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in pairs)

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


COHORT_ROWS = (
    ("memorized (default policy)", "memorized", _pct),
    ("misattributed (a false value, p <= 0.01)", "misattributed", _pct),
    ("M̄: mean share of templates at rank 1", "mean_memorization", _pct),
    ("rank1_any: some template ranks it 1st", "lenient", _pct),
    ("rank1_all: every template does", "strict", _pct),
    ("z̄* over rank-1 templates", "z_star", _num),
    ("people with nothing ranked 1st (H_M=0)", "zero_memorization", _pct),
)


def report_text(batch: dict[str, Any], report: dict[str, Any]) -> str:
    """What the dashboard's batch page shows, as text: progress, per model the cohort beside the null and the same
    per property, the model comparison and the report's notes."""
    p = batch["progress"]
    done = sum(p[status] for status in FINAL_STATUSES)
    eta = f", {duration(batch['eta_seconds'])} left" if batch.get("eta_seconds") else ""
    out = [
        f"batch {batch['id']}: {batch['people']} people on {', '.join(batch['models'])}, {batch['status']}",
        f"audits: {done}/{p['total']} done ({p['succeeded']} succeeded, {p['running']} running, {p['queued']} queued,"
        f" {p['failed']} failed, {p['cancelled']} cancelled){eta}",
    ]
    for model, cohort in report.get("cohorts", {}).items():
        out += ["", f"== {model}", *_cohort_lines(cohort)]
    if report.get("comparison"):
        out += ["", _comparison_table(report["comparison"])]
    out += [f"note: {note}" for note in report.get("notes", [])]
    return "\n".join(out)


def _cohort_lines(cohort: dict[str, Any] | None) -> list[str]:
    """One model's cohort beside its null, then per property."""
    if not cohort:
        return ["no finished audits on this model yet (or more than the report reads: see the notes)"]
    c, n = cohort["cohort"], cohort.get("null") or {}
    out = [f"{c['subjects']} people, {c['facts']} facts" + ("" if n else "; the null is not ready yet")]
    rows = [[label, fmt(c.get(key)), fmt(n.get(key)) if n else "–"] for label, key, fmt in COHORT_ROWS]
    out += ["", table(rows, ["statistic", "cohort", "null"])]
    per = cohort.get("per_property") or {}
    if per:
        rows = [
            [
                pid,
                str(t.get("facts", "")),
                _pct(t.get("mean_share")),
                _pct(t.get("lenient")),
                _pct(t.get("null_lenient")),
                _pct(t.get("memorized")) if t.get("memorized") is not None else "pending",
                _pct(t.get("null_pvalue")),
            ]
            for pid, t in per.items()
        ]
        header = ["property", "facts", "M̄", "rank1_any", "null rank1_any", "memorized", "null FPR"]
        out += ["", table(rows, header)]
    return out


def _comparison_table(comparison: list[dict[str, Any]]) -> str:
    rows = [
        [f"{x['a']} / {x['b']}", str(x["people"]), str(x["facts"]), str(x["only_a"]), str(x["only_b"]), str(x["both"])]
        for x in comparison
    ]
    return table(rows, ["models (rank1_any)", "people", "facts", "only first", "only second", "both"])


def cmd_batch_show(args: argparse.Namespace) -> int:
    client = make_client(args)
    if args.batch_command == "report":
        report = client.batch(args.id, "report")
        print(json.dumps(report) if args.json else report_text(client.batch(args.id), report))
        return 0
    print(json.dumps(client.batch(args.id)))
    return 0


def add_batch_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("batch")
    bs = p.add_subparsers(dest="batch_command", required=True)
    s = bs.add_parser("submit", help="submit a roster file (CSV: name, wikidata_id, P106 … columns; or JSON lines)")
    s.add_argument("roster", help="the roster file (.csv or .jsonl)")
    s.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="MODEL",
        help="also audit the roster on this model (repeatable): the report compares them",
    )
    s.add_argument("--context", action="store_true", help="also probe contextualized canaries")
    s.add_argument("--partial", action="store_true", help="create the valid rows and list the others")
    s.add_argument("--no-wait", action="store_true", help="print the batch and return at once")
    s.add_argument(
        "--report", action="store_true", help="print the cohort report's tables when done (else the progress, JSON)"
    )
    s.add_argument("--json", action="store_true", help="with --report: the report as JSON instead of tables")
    add_audit_options(s)
    add_client_arguments(s)
    s.set_defaults(func=cmd_batch_submit)
    for name, text in (("status", "a batch's progress (JSON)"), ("report", "a batch's cohort report, as tables")):
        c = bs.add_parser(name, help=text)
        c.add_argument("id")
        if name == "report":
            c.add_argument("--json", action="store_true", help="print GET /batches/{id}/report's JSON instead")
        add_client_arguments(c)
        c.set_defaults(func=cmd_batch_show)
