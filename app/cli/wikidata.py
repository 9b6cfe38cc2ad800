"""`memaudit import-wikidata DUMP`: stream a Wikidata JSON dump into the database (resumable)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from app.cli.client import open_local_database
from app.errors import InvalidInput
from app.wikidata.importer import import_dump


def cmd_import_wikidata(args: argparse.Namespace) -> int:
    if not args.dump.exists():
        raise InvalidInput("dump", f"no such file: {args.dump}")
    open_local_database()  # the embedded SQLite schema on first use

    def progress(humans: int) -> None:
        print(f"  {humans} humans stored", file=sys.stderr, flush=True)

    report = import_dump(args.dump, batch_size=args.batch_size, min_humans=args.min_humans, on_batch=progress)
    print(json.dumps(asdict(report), indent=2))
    if report.bad_lines:
        shown = ", ".join(map(str, report.bad_line_numbers[:20]))
        print(f"skipped {report.bad_lines} unreadable line(s): {shown}", file=sys.stderr)
    return 0


def add_wikidata_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-wikidata")  # its help: app.cli.COMMANDS
    p.add_argument("dump", type=Path, help="path to the dump file")
    p.add_argument("--batch-size", type=int, default=500, help="humans per committed batch (the resume step)")
    p.add_argument("--min-humans", type=int, default=100, help="build a pool for properties used by this many humans")
    p.set_defaults(func=cmd_import_wikidata)
