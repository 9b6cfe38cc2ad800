"""Produce the null that ships with the package (app/nulls/shipped/): the default model's null for the CLI's and the
demo's default configuration, computed by the service itself (a `null` audit, exactly what a submission would queue),
then written as a null artifact (app/nulls/artifact.py, `memaudit.null/1`).

    nice -n 10 python -m benchmarks.ship_null                 # smollm2-135m: the demo's and the measured properties
    python -m benchmarks.ship_null --model groundtruth-tiny

The database is kept between runs (var/ship-null.sqlite3 by default): a run after a code change re-computes the null
with every unchanged sentence read from its NLL cache. MEMAUDIT_TORCH_THREADS defaults to 1 here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEMO_PEOPLE = REPO / "app" / "cli" / "demo_people.json"


def demo_properties() -> list[str]:
    """The properties of the demo's people (what `make demo` audits), in catalog order."""
    people = json.loads(DEMO_PEOPLE.read_text())["people"]
    return sorted({f["property"] for p in people for f in p["facts"]}, key=lambda p: int(p[1:]))


def shipped_properties() -> list[str]:
    """What a shipped null holds: the demo's properties and the five the verdict is measured on, in catalog
    order (so that a first audit of any of them gets its p-value at once)."""
    from benchmarks.verdict_power import PIDS  # occupation, citizenship, birthplace, sex or gender, languages

    return sorted({*demo_properties(), *PIDS}, key=lambda p: int(p[1:]))


def default_options() -> dict[str, Any]:
    """The subject options the CLI's `audit` and `demo` send by default (app/cli/audit.py), as a null stores them."""
    from app.cli.audit import CLI_PARAPHRASES
    from app.subjects.schemas import SubjectAuditOptions

    sent = {"paraphrases": CLI_PARAPHRASES, "counterfactuals": SubjectAuditOptions().counterfactuals, "context": False}
    return SubjectAuditOptions(**sent).model_dump(mode="json") | {"seed": 0}


def compute(client: Any, model: str, properties: list[str], options: dict[str, Any]) -> str:
    """Submit the null audit and wait for it (progress on standard error). Returns its id."""
    from app.cli.output import wait

    body = {"kind": "null", "model": model, "properties": properties, "options": options}
    audit_id = client.submit(body)
    audit = wait(client, audit_id, f"null of {model}")
    if audit["status"] != "succeeded":
        raise SystemExit(f"ship_null: the null audit {audit_id} ended {audit['status']}: {audit.get('error')}")
    return audit_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="default: the CLI's default model")
    parser.add_argument("--database", default=str(REPO / "var" / "ship-null.sqlite3"), help="kept: its NLL cache")
    parser.add_argument("--out", default=str(REPO / "app" / "nulls" / "shipped"))
    parser.add_argument("--properties", nargs="*", default=None, help="default: the demo's and the measured properties")
    args = parser.parse_args(argv)
    os.environ["MEMAUDIT_DATABASE_URL"] = f"sqlite:///{Path(args.database).resolve()}"
    os.environ.setdefault("MEMAUDIT_TORCH_THREADS", "1")
    os.environ.pop("MEMAUDIT_REDIS_URL", None)
    os.environ["MEMAUDIT_SHIPPED_NULLS"] = "false"  # compute it: never import the file it is about to replace
    Path(args.database).parent.mkdir(parents=True, exist_ok=True)

    from app.cli.client import Client
    from app.cli.output import setup_logging
    from app.settings import get_settings

    setup_logging(verbose=False)
    model = args.model or get_settings().default_model
    properties = args.properties or shipped_properties()
    options = default_options()
    started = time.monotonic()
    client = Client.in_process()
    audit_id = compute(client, model, properties, options)
    seconds = time.monotonic() - started
    out = write(client, audit_id, model, Path(args.out))
    print(f"null audit {audit_id} ({seconds:.0f} s) written to {out} ({out.stat().st_size:,} bytes)", file=sys.stderr)
    return 0


def write(client: Any, audit_id: str, model: str, out_dir: Path) -> Path:
    """The null as the package's file for ``model`` (replacing the one there), checked: it must validate, hold the
    weights file's digest (by which a submission matches it) and no name but its cohort's."""
    from app.nulls.artifact import SUFFIX, parse, validate

    data = client.null_artifact(audit_id)
    artifact = validate(parse(data))
    if not artifact.document["model"].get("weights"):
        raise SystemExit(f"ship_null: {model}'s weights are not visible to this process: nothing to match them by")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{model}{SUFFIX}"
    out.write_bytes(data)
    return out


if __name__ == "__main__":
    sys.exit(main())
