"""`memaudit nulls export|import|ship`: a null as a file (``memaudit.null/1``, app/nulls/artifact.py), through the
one client (app/cli/client.py): locally the API in this process as the CLI's admin key, or a running API
(--api-url/--api-key, an admin key). `ship` builds the nulls that ship with the package (app/nulls/shipped/): the
null a submission would create for the CLI's default configuration, computed by the service itself on a fresh
embedded database, and what was measured about it (app/nulls/measured.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.cli.client import add_client_arguments, make_client
from app.errors import DomainError

PACKAGE = Path(__file__).resolve().parent.parent
DEMO_PEOPLE = PACKAGE / "cli" / "demo_people.json"
SHIPPED_DIR = PACKAGE / "nulls" / "shipped"
# What the verdict is measured on (occupation, citizenship, birthplace, sex or gender, languages: docs/measures.md):
# a shipped null holds them, so that a first audit of any of them gets its p-value at once.
MEASURED_PROPERTIES = ("P106", "P27", "P19", "P21", "P1412")
# The environment `ship` computes in: the same settings for every run, so the same code writes the same bytes. One
# torch thread (float sums in another order move the last bits); no queue (the embedded worker); no shipped null
# imported (the file it is about to replace).
SHIP_ENV = {"MEMAUDIT_TORCH_THREADS": "1", "MEMAUDIT_SHIPPED_NULLS": "false"}


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


def demo_properties() -> list[str]:
    """The properties of the demo's people (what `make demo` audits), in catalog order."""
    people = json.loads(DEMO_PEOPLE.read_text())["people"]
    return sorted({f["property"] for p in people for f in p["facts"]}, key=lambda p: int(p[1:]))


def shipped_properties() -> list[str]:
    """What a shipped null holds: the demo's properties and the measured ones, in catalog order (the order matters
    for reproduction: a null person's values are drawn property by property in the null audit's order)."""
    return sorted({*demo_properties(), *MEASURED_PROPERTIES}, key=lambda p: int(p[1:]))


def default_options() -> dict[str, Any]:
    """The subject options the CLI's `audit` and `demo` send by default (app/cli/audit.py), as a null stores them."""
    from app.subjects.schemas import SubjectAuditOptions
    from core import defaults

    sent = {
        "paraphrases": defaults.PARAPHRASES,
        "counterfactuals": SubjectAuditOptions().counterfactuals,
        "context": False,
    }
    return SubjectAuditOptions(**sent).model_dump(mode="json") | {"seed": 0}


def compute_null(model: str, properties: list[str]) -> bytes:
    """The null audit a submission would create (seed 0), computed in this process by the embedded worker on the
    configured database; returns its artifact's bytes, checked."""
    from app.cli.client import Client
    from app.cli.output import wait
    from app.nulls.artifact import dumps, parse, validate

    client = Client.in_process()
    body = {"kind": "null", "model": model, "properties": properties, "options": default_options()}
    audit_id = client.submit(body)
    audit = wait(client, audit_id, f"null of {model}")
    if audit["status"] != "succeeded":
        raise DomainError(f"the null audit {audit_id} ended {audit['status']}: {audit.get('error')}")
    document = validate(parse(client.null_artifact(audit_id))).document
    if not document["model"].get("weights"):
        raise DomainError(f"{model}'s weights are not visible to this process: nothing to match them by", "model")
    return dumps(reproducible(document))


def reproducible(document: dict[str, Any]) -> dict[str, Any]:
    """The document without what differs from run to run: of the null's cost, the sentences it took (the seconds,
    and how many were scored or read from the NLL cache, depend on the machine and on what the database held)."""
    cost = document.get("cost") or {}
    sentences = (cost.get("scored") or 0) + (cost.get("cached") or 0)
    return document | {"cost": {"fingerprint": cost.get("fingerprint"), "sentences": sentences}}


def _ship_environment(database: str | None) -> tempfile.TemporaryDirectory | None:
    """Point this process at the database `ship` computes in (a fresh one unless --database) before anything reads
    the settings; returns the temporary directory to remove afterwards."""
    from app.settings import get_settings

    tmp = None if database else tempfile.TemporaryDirectory(prefix="memaudit-ship-")
    path = Path(database) if database else Path(tmp.name) / "ship.sqlite3"
    path.parent.mkdir(parents=True, exist_ok=True)
    os.environ.update(SHIP_ENV | {"MEMAUDIT_DATABASE_URL": f"sqlite:///{path.resolve()}"})
    os.environ.pop("MEMAUDIT_REDIS_URL", None)
    get_settings.cache_clear()
    return tmp


def write_measured(model: str, out: Path, results: Path) -> Path | None:
    """The measurements of ``model``'s shipped null from the benchmarks' results files, beside it; None (nothing
    written) where the results hold none for this model."""
    from app.nulls import measured
    from app.nulls.artifact import SUFFIX, parse, validate

    artifact = validate(parse((out / f"{model}{SUFFIX}").read_bytes()))
    try:
        document = measured.build(results, model, artifact.fingerprint)
    except (OSError, KeyError, ValueError) as exc:
        print(f"no measurements of {model} in {results} ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    path = out / f"{model}{measured.SUFFIX}"
    path.write_bytes(measured.dumps(document))
    return path


def cmd_ship(args: argparse.Namespace) -> int:
    from app.nulls.artifact import SUFFIX
    from app.settings import get_settings

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.measured_only:
        tmp = _ship_environment(args.database)
        try:
            model = args.model or get_settings().default_model
            started = time.monotonic()
            data = compute_null(model, args.properties or shipped_properties())
            (out / f"{model}{SUFFIX}").write_bytes(data)
            seconds = time.monotonic() - started
            print(f"wrote {out / f'{model}{SUFFIX}'} ({len(data):,} bytes, {seconds:.0f} s)", file=sys.stderr)
        finally:
            if tmp is not None:
                tmp.cleanup()
    model = args.model or get_settings().default_model
    if (path := write_measured(model, out, Path(args.results))) is not None:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _add_ship_command(ns: argparse._SubParsersAction) -> None:
    s = ns.add_parser(
        "ship",
        help="build the null that ships with the package for a model (the CLI's default configuration, computed"
        " here by the service on a fresh database: the same code writes the same bytes), and its measurements",
    )
    s.add_argument("--model", default=None, help="default: the CLI's default model")
    s.add_argument("--out", default=str(SHIPPED_DIR), help="the directory to write to (default: the package's)")
    s.add_argument("--properties", nargs="*", default=None, help="default: the demo's and the measured properties")
    s.add_argument(
        "--database",
        default=None,
        help="compute in this SQLite file and keep it: a later run reads unchanged sentences from its NLL cache"
        " (faster; the bytes may then differ in the last bits of the floats). Default: a fresh temporary one",
    )
    s.add_argument(
        "--results",
        default="benchmarks/results",
        help="the benchmarks' results files the measurements are read from (default: benchmarks/results)",
    )
    s.add_argument(
        "--measured-only", action="store_true", help="only write the measurements beside the null already in --out"
    )
    s.set_defaults(func=cmd_ship)


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
    _add_ship_command(ns)
