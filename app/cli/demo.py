"""`memaudit demo`: audit a handful of well-known people on the default real model, print what it has
memorized, and write a forget set."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from app.settings import get_settings

PEOPLE = Path(__file__).resolve().parent / "demo_people.json"


def cmd_demo(args: argparse.Namespace) -> int:
    from app.cli.audit import LocalClient, print_table, wait
    from app.forget_set import service
    from app.forget_set.repository import ForgetFilters

    people = json.loads(PEOPLE.read_text())["people"][: args.people]
    model = args.model or get_settings().default_model
    client = LocalClient()
    started = time.monotonic()
    print(f"memaudit demo: auditing {len(people)} people on {model} "
          f"(baseline + {args.paraphrases} paraphrases per fact, 100 counterfactuals each)", flush=True)
    audits = []
    for person in people:
        payload = {"kind": "subject", "model": model, "subject": person,
                   "options": {"paraphrases": args.paraphrases}}
        audits.append((person["name"], client.submit(payload)))
    lenient = total = 0
    for name, audit_id in audits:
        audit = wait(client, audit_id, name)
        if audit["status"] != "succeeded":
            print(f"{name}: audit {audit['status']}: {audit.get('error')}", file=sys.stderr)
            return 1
        facts = client.facts(audit_id)
        print_table(name, facts)
        lenient += sum(f["lenient"] for f in facts["facts"])
        total += len(facts["facts"])
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    filters = ForgetFilters(audit_id=None, model=model, policy="lenient")  # p-values need nulls computed first
    ids = {a for _, a in audits}
    with out.open("w", encoding="utf-8") as fh:
        n = 0
        for row in service.records(_cli_principal(), filters):
            if row["audit_id"] in ids:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    print(f"\n{lenient}/{total} facts memorized (lenient: a true value ranks first under some template).")
    print(f"Forget set: {n} records written to {out}  ({time.monotonic() - started:.0f} s)")
    return 0


def _cli_principal():  # noqa: ANN202
    from app.cli.audit import CLI_PRINCIPAL

    return CLI_PRINCIPAL


def add_demo_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="audit well-known people on the default model and write a forget set")
    p.add_argument("--model", default=None)
    p.add_argument("--people", type=int, default=4, help="how many of the demo people to audit")
    p.add_argument("--paraphrases", type=int, default=2, help="paraphrased templates besides the baseline")
    p.add_argument("--output", default="var/forget-set.jsonl")
    p.set_defaults(func=cmd_demo)
