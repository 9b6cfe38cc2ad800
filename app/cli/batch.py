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

from app.batches.service import RosterRejected
from app.cli.audit import add_audit_options, audit_options
from app.cli.client import ApiRefused, Client, add_client_arguments, make_client
from app.cli.output import POLL_SECONDS, duration
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
    except RosterRejected as exc:  # the local client
        print(f"memaudit: {exc.message}", file=sys.stderr)
        _print_rejected([{"row": e.row, "field": e.field, "message": e.message} for e in exc.roster.errors])
        return 2
    except ApiRefused as exc:  # over HTTP: the API's 422 lists the same rows
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
    print(json.dumps(client.batch(batch["id"], "report") if args.report else batch))
    return 0 if batch["progress"]["failed"] == 0 else 1


def wait_batch(client: Client, batch_id: str) -> dict[str, Any]:
    """Poll until no audit of the batch is queued or running; one bar over all its audits. Ctrl-C stops waiting,
    not the batch (``DELETE /batches/{id}`` cancels it)."""
    batch = client.batch(batch_id)
    bar = tqdm(
        total=batch["progress"]["total"],
        desc=f"batch {batch_id[:8]}",
        file=sys.stderr,
        bar_format=BATCH_BAR,
        mininterval=1.0,
    )
    try:
        while True:
            p = batch["progress"]
            bar.n = p["succeeded"] + p["failed"] + p["cancelled"]
            eta = f", {duration(batch['eta_seconds'])} left" if batch.get("eta_seconds") else ""
            bar.set_postfix_str(f"{p['running']} running, {p['failed']} failed{eta}", refresh=True)
            if batch["status"] in ("finished", "cancelled"):
                return batch
            time.sleep(POLL_SECONDS)
            batch = client.batch(batch_id)
    finally:
        bar.close()


def cmd_batch_show(args: argparse.Namespace) -> int:
    print(json.dumps(make_client(args).batch(args.id, "report" if args.batch_command == "report" else "")))
    return 0


def add_batch_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("batch", help="audit a roster of people (a cohort) at once")
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
    s.add_argument("--report", action="store_true", help="print the cohort report when done (else the progress)")
    add_audit_options(s)
    add_client_arguments(s)
    s.set_defaults(func=cmd_batch_submit)
    for name, text in (("status", "a batch's progress"), ("report", "a batch's cohort report")):
        c = bs.add_parser(name, help=text)
        c.add_argument("id")
        add_client_arguments(c)
        c.set_defaults(func=cmd_batch_show)
