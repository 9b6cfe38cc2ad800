"""`memaudit demo`: audit a handful of well-known people on the default real model, print what it has memorized,
and write a forget set. Running it again re-audits the same subjects (no copies are stored) and reads every
sentence's score from the NLL cache, so a second run takes a fraction of the first."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.cli.audit import (
    SHARE_NOTE,
    add_audit_options,
    audit_options,
    plan_line,
    print_table,
    ranked_first_lines,
    typical_names_line,
    verdict_notes,
)
from app.cli.client import Client, add_client_arguments, make_client
from app.cli.output import duration, failure_line, null_source_line, wait, wait_for_nulls
from app.db.vocabulary import AuditStatus
from app.policies import DEFAULT, NO_NULL
from app.settings import get_settings
from app.streaming import END_KEY

PEOPLE = Path(__file__).resolve().parent / "demo_people.json"
QUICK_PEOPLE = 2  # --quick (CI): the same run on the first two people


NULL_FAILED_NOTE = (
    "memorized is `failed`: this model's null audit (fictitious people audited the same way) failed, "
    "so these facts have no p-value; it is not retried on its own: POST /audits with kind `null` "
    f"runs it again (docs/measures.md). This forget set is by the {NO_NULL} policy."
)
NULL_NOTE = (
    "memorized is `pending`: the p-value is not computed yet: p-values need this model's null (fictitious people"
    " audited the same way), created with the first audit of this configuration; it goes on under `memaudit serve`,"
    " a worker, or the next run (--null-wait), from what it has stored, and later audits and exports use it. This"
    f" forget set is by the {NO_NULL} policy."
)


NULL_MISSING_NOTE = (
    "memorized is `missing`: no null exists for this model and configuration on the weights these audits ran on "
    "(cancelled, or the model changed); the next run creates it, or POST /audits with kind `null` (docs/measures.md)."
)


UNCALIBRATED_NOTE = (
    "memorized is `uncalibrated`: no null covers that fact's shape (a true value outside the property's pool of"
    " counterfactual values where the null has no out-of-pool values of its kind, or more than 3 true values), so it"
    " gets no p-value (docs/measures.md); its ranks are shown."
)


def calibration_notes(statuses: Mapping[str, int]) -> list[str]:
    """What the table's `memorized` column needs said, from how many facts had each calibration status."""
    notes = (
        ("pending", NULL_NOTE),
        ("failed", NULL_FAILED_NOTE),
        ("missing", NULL_MISSING_NOTE),
        ("uncalibrated", UNCALIBRATED_NOTE),
    )
    return [note for status, note in notes if statuses.get(status)]


def write_forget_set(client: Client, audit_ids: list[str], out: Path, policy: str = DEFAULT) -> int:
    """The audits' forget set under ``policy``: the default (p <= 0.01) where every fact has its p-value; the demo
    falls back to lenient (and says so) where the null is not ready. One export per audit, written as one file
    that ends like every jsonl export, with one ``{"_end": {"records": N, ...}}`` line (the exports' markers
    merged: their counts added)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    end: dict[str, Any] = {}
    with out.open("w", encoding="utf-8") as fh:
        for audit_id in audit_ids:
            text = "".join(client.forget_set({"format": "jsonl", "audit_id": audit_id, "policy": policy}))
            for line in text.splitlines(keepends=True):
                if line.startswith(f'{{"{END_KEY}"'):
                    _merge_end(end, json.loads(line)[END_KEY])
                elif line.strip():
                    fh.write(line)
                    n += 1
        fh.write(json.dumps({END_KEY: end | {"records": n}}) + "\n")
    return n


def _merge_end(into: dict[str, Any], end: Mapping[str, Any]) -> None:
    """One export's end marker added into ``into``: counts summed (nested counts too), anything else kept."""
    for key, value in end.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, dict)):
            into[key] = value
        elif isinstance(value, dict):
            _merge_end(into.setdefault(key, {}), value)
        else:
            into[key] = into.get(key, 0) + value


def _totals(facts: list[dict[str, Any]], lenient: int, scored: int, cached: int) -> str:
    """The demo's closing count: facts memorized, facts a template ranks first, sentences scored and cached."""
    memorized, total = sum(bool((f.get("calibration") or {}).get("memorized")) for f in facts), len(facts)
    return (
        f"{memorized}/{total} facts memorized (p <= 0.01 against the model's null); {lenient}/{total} have a true"
        " value ranked first under at least one template (what chance alone also gives, see the null's rates).\n"
        f"Scored {scored:,} new sentences, {cached:,} read from the NLL cache."
    )


def cmd_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    n_people = QUICK_PEOPLE if args.quick else args.people
    people: list[dict[str, Any]] = json.loads(PEOPLE.read_text())["people"][:n_people]
    model = args.model or get_settings().default_model
    options = audit_options(args)
    client = make_client(args)
    n_facts = sum(len(p["facts"]) for p in people)
    who = f"{len(people)} {'person' if len(people) == 1 else 'people'}, {n_facts} facts"
    print(f"memaudit demo ({client.where}): {plan_line(who, model, options)}", flush=True)
    audits = [
        (p["name"], client.submit({"kind": "subject", "model": model, "subject": p, "options": options}))
        for p in people
    ]
    lenient = scored = cached = 0
    all_facts: list[dict[str, Any]] = []
    calibration: Counter[str] = Counter()  # facts by calibration status: ready | pending | failed
    sources: dict[str, None] = {}  # where the nulls came from, when not computed here (shipped, imported)
    for name, audit_id in audits:
        audit = wait(client, audit_id, name)
        if audit["status"] != AuditStatus.SUCCEEDED:
            print(f"memaudit: {name}: {failure_line(audit, client.local)}", file=sys.stderr)
            return 1
        facts = wait_for_nulls(client, audit_id, args.null_wait)
        print_table(name, facts)
        for line in ranked_first_lines(facts["facts"]):
            print(line)
        sources.setdefault(null_source_line(facts) or "")
        all_facts += facts["facts"]
        lenient += sum(f["lenient"] for f in facts["facts"])
        calibration.update((f.get("calibration") or {}).get("status", "none") for f in facts["facts"])
        stats = (audit.get("summary") or {}).get("scoring") or {}
        scored, cached = scored + stats.get("scored", 0), cached + stats.get("cached", 0)
    calibrated = not (calibration.keys() & {"pending", "failed", "missing"})
    policy = DEFAULT if calibrated else NO_NULL
    n = write_forget_set(client, [a for _, a in audits], Path(args.output), policy)
    print(f"\n{SHARE_NOTE}.")
    for note in verdict_notes(model, all_facts):
        print(note)
    if caveat := typical_names_line(all_facts):
        print(caveat)
    print(_totals(all_facts, lenient, scored, cached))
    for note in [*calibration_notes(calibration), *filter(None, sources)]:
        print(note)
    records = f"{n} record{'' if n == 1 else 's'}"
    rule = "p <= 0.01" if calibrated else f"{NO_NULL}: the null is not ready"
    print(f"Forget set ({rule}): wrote {records} to {args.output}  ({duration(time.monotonic() - started)} in all)")
    return 0


def add_demo_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo")
    p.add_argument("--people", type=int, default=4, help="how many of the demo people to audit (at most 4)")
    p.add_argument("--quick", action="store_true", help=f"the same run on {QUICK_PEOPLE} people (CI uses it)")
    add_audit_options(p)
    p.add_argument("--output", default="var/forget-set.jsonl", help="the forget set's file (JSON lines)")
    add_client_arguments(p)
    p.set_defaults(func=cmd_demo, context=False)
