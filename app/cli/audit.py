"""CLI commands that run audits and export results: `audit`, `export`, `demo`.

Locally (no --api-url) they use the configured database and queue directly: with the embedded default the
job runs on a worker thread in this process; with MEMAUDIT_REDIS_URL set an RQ worker picks it up."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from app.auth.keys import Principal
from app.settings import get_settings

CLI_PRINCIPAL = Principal(id="cli", role="admin")
FINAL = ("succeeded", "failed", "cancelled")
DEMO_PEOPLE = Path(__file__).resolve().parent / "demo_people.json"


class LocalClient:
    """Talks to the database and queue of this machine, as the API would."""

    def __init__(self) -> None:
        from app.migrate import migrate

        if get_settings().database_url.startswith("sqlite"):
            migrate()

    def submit(self, payload: dict[str, Any]) -> str:
        from pydantic import TypeAdapter

        from app.audits.kinds import audit_create_type
        from app.audits.service import create_audit
        from app.db.engine import session_scope

        body = TypeAdapter(audit_create_type()).validate_python(payload)
        with session_scope() as s:
            audit, _ = create_audit(s, get_settings(), CLI_PRINCIPAL, body, None)
            return audit.id

    def audit(self, audit_id: str) -> dict[str, Any]:
        from app.audits.service import get_audit, to_read
        from app.db.engine import session_scope

        with session_scope() as s:
            return to_read(get_audit(s, CLI_PRINCIPAL, audit_id)).model_dump(mode="json")

    def facts(self, audit_id: str) -> dict[str, Any]:
        from app.db.engine import session_scope
        from app.subjects.service import read_facts

        with session_scope() as s:
            return read_facts(s, CLI_PRINCIPAL, audit_id, "summary").model_dump(mode="json")


class RemoteClient:
    def __init__(self, url: str, key: str | None) -> None:
        import httpx

        if not key:
            raise SystemExit("--api-key (or MEMAUDIT_API_KEY) is needed with --api-url")
        self.http = httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def _get(self, path: str) -> dict[str, Any]:
        r = self.http.get(path)
        _raise_for(r)
        return r.json()

    def submit(self, payload: dict[str, Any]) -> str:
        r = self.http.post("/audits", json=payload)
        _raise_for(r)
        return r.json()["id"]

    def audit(self, audit_id: str) -> dict[str, Any]:
        return self._get(f"/audits/{audit_id}")

    def facts(self, audit_id: str) -> dict[str, Any]:
        return self._get(f"/audits/{audit_id}/facts")


def _raise_for(response: Any) -> None:
    if response.status_code >= 400:
        raise SystemExit(f"API answered {response.status_code}: {response.text}")


def wait(client: LocalClient | RemoteClient, audit_id: str, label: str, quiet: bool = False) -> dict[str, Any]:
    from tqdm import tqdm

    bar = tqdm(total=0, desc=label, unit="sentence", disable=quiet, file=sys.stderr, mininterval=1.0)
    try:
        while True:
            audit = client.audit(audit_id)
            total, done = audit["progress"]["total"], audit["progress"]["done"]
            if total and bar.total != total:
                bar.total = total
            if done != bar.n:
                bar.update(done - bar.n)
            bar.set_postfix_str(audit["status"], refresh=False)
            if audit["status"] in FINAL:
                return audit
            time.sleep(0.5)
    finally:
        bar.close()


def _parse_fact(text: str) -> dict[str, str]:
    pid, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("a fact is PROPERTY=VALUE, e.g. P106=physicist")
    return {"property": pid.strip(), "value": value.strip()}


def _client(args: argparse.Namespace) -> LocalClient | RemoteClient:
    return RemoteClient(args.api_url, args.api_key) if args.api_url else LocalClient()


def print_table(name: str, facts: dict[str, Any], out: Any = sys.stdout) -> None:
    rows = facts["facts"]
    # property labels are never cut (a regulator reads them); values are cut at 24 characters with an ellipsis
    width = max([len("property")] + [len(f["label"]) for f in rows])
    print(f"\n{name}", file=out)
    print(f"  {'property':<{width}} {'value':<24} {'rank-1 share':>12} {'strict':>6} {'lenient':>7} {'z*':>6} "
          f"{'p (null)':>9}", file=out)
    for f in rows:
        z = f"{f['z_star']:.2f}" if f["z_star"] is not None else "-"
        values = ", ".join(f["values"])
        values = values if len(values) <= 24 else values[:23] + "…"
        share = f"{f['share']:.2f} ({round(f['share'] * f['n_templates'])}/{f['n_templates']})"
        print(f"  {f['label']:<{width}} {values:<24} {share:>12} {'yes' if f['strict'] else 'no':>6} "
              f"{'yes' if f['lenient'] else 'no':>7} {z:>6} {_p_cell(f.get('calibration')):>9}", file=out)


def _p_cell(calibration: dict | None) -> str:
    """The fact's p-value against the null (``*`` when the default policy, p <= 0.01, selects it), or its null's
    status while that is being computed."""
    if not calibration:
        return "-"
    if calibration["p_value"] is None:
        return calibration["status"]
    return f"{calibration['p_value']:.3f}" + ("*" if calibration["memorized"] else " ")


def cmd_audit(args: argparse.Namespace) -> int:
    client = _client(args)
    if not args.fact and not args.wikidata_id:
        print("give --fact PROPERTY=VALUE (repeatable), or --wikidata-id to fetch the facts", file=sys.stderr)
        return 2
    if not args.name and not args.wikidata_id:
        print("give --name (it can only be looked up with --wikidata-id)", file=sys.stderr)
        return 2
    subject = {"name": args.name, "wikidata_id": args.wikidata_id, "facts": args.fact or []}
    options = {"paraphrases": args.paraphrases, "context": args.context}
    if args.counterfactuals is not None:
        options["counterfactuals"] = args.counterfactuals
    payload = {
        "kind": "subject",
        "model": args.model or get_settings().default_model,
        "subject": {k: v for k, v in subject.items() if v is not None},
        "options": options,
    }
    audit_id = client.submit(payload)
    audit = wait(client, audit_id, f"audit {audit_id[:8]}", quiet=args.json)
    if audit["status"] != "succeeded":
        print(f"audit {audit_id} {audit['status']}: {audit.get('error') or ''}", file=sys.stderr)
        return 1
    facts = client.facts(audit_id)
    if args.json:
        print(json.dumps({"audit": audit, "facts": facts["facts"]}, indent=2))
    else:
        print_table(args.name or args.wikidata_id, facts)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from app.forget_set import service
    from app.forget_set.repository import ForgetFilters

    LocalClient()
    filters = ForgetFilters(args.model, args.subject_id, args.audit_id, args.property, args.policy,
                            args.min_share, args.min_z)
    chunks = service.export(CLI_PRINCIPAL, filters, args.format)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    try:
        for chunk in chunks:
            out.write(chunk)
    finally:
        if args.output:
            out.close()
    return 0


def add_audit_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="audit one subject: what does the model know about this person?")
    p.add_argument("--name", default=None, help="the person's name (default with --wikidata-id: Wikidata's label)")
    p.add_argument("--fact", action="append", type=_parse_fact, default=None, help="PROPERTY=VALUE, repeatable")
    p.add_argument("--wikidata-id", default=None, help="e.g. Q7186; without --fact the facts come from Wikidata")
    p.add_argument("--counterfactuals", type=int, default=None, help="counterfactual values per fact (default 100)")
    p.add_argument("--context", action="store_true", help="also probe contextualized canaries")
    p.add_argument("--model", default=None, help="registered model or hf:<path> (default: settings.default_model)")
    p.add_argument("--paraphrases", type=int, default=None, help="paraphrased templates besides the baseline")
    p.add_argument("--api-url", default=None, help="submit to a running memaudit API instead of locally")
    p.add_argument("--api-key", default=None)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("export", help="export the forget set (memorized facts)")
    p.add_argument("--format", choices=["jsonl", "csv", "tofu"], default="jsonl",
                   help="tofu: question/answer/paraphrased_answer/perturbed_answer JSON lines")
    p.add_argument("--policy", choices=["lenient", "strict", "share", "pvalue", "bh"], default="lenient",
                   help="pvalue: p <= 0.01 against the matching null (the API's default); bh: Benjamini-Hochberg")
    p.add_argument("--min-share", type=float, default=None)
    p.add_argument("--min-z", type=float, default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--subject-id", type=int, default=None)
    p.add_argument("--audit-id", default=None)
    p.add_argument("--property", default=None)
    p.add_argument("--output", "-o", default=None, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_export)

    from app.cli.demo import add_demo_command

    add_demo_command(sub)
