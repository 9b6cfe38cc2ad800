"""`memaudit nulls export|import`: a null as a file (``memaudit.null/1``, app/nulls/artifact.py), through the one
client (app/cli/client.py): locally the API in this process as the CLI's admin key, or a running API
(--api-url/--api-key, an admin key)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.client import add_client_arguments, make_client
from app.errors import DomainError


def cmd_export(args: argparse.Namespace) -> int:
    data = make_client(args).null_artifact(args.audit_id)
    Path(args.output).write_bytes(data)
    print(f"wrote the null {args.audit_id} ({len(data):,} bytes) to {args.output}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    try:
        data = Path(args.file).read_bytes()
    except OSError as exc:
        raise DomainError(f"cannot read the file ({type(exc).__name__})", field="file") from None
    answer = make_client(args).import_null(data, args.model)
    what = "imported as" if answer["created"] else "already imported:"
    print(f"{what} null audit {answer['null_audit_id']}")
    return 0


def add_null_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nulls")
    ns = p.add_subparsers(dest="nulls_command", required=True)
    e = ns.add_parser("export", help="write a succeeded null audit as a file (gzip JSON, fictitious people only)")
    e.add_argument("audit_id", help="the null audit's id (a subject audit's facts name it: calibration.nulls)")
    e.add_argument("-o", "--output", required=True, help="the file to write, e.g. null.null.json.gz")
    add_client_arguments(e)
    e.set_defaults(func=cmd_export)
    i = ns.add_parser("import", help="import a null file: audits of its model and configuration use it")
    i.add_argument("file", help="a file `memaudit nulls export` (or GET /nulls/{id}/artifact) wrote")
    i.add_argument("--model", default=None, help="import it under this model name (default: the file's)")
    add_client_arguments(i)
    i.set_defaults(func=cmd_import)
