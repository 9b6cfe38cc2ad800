"""`memaudit verify`: did the forgetting work? Check an unlearned model against the forget set it was given.

memaudit verify --before groundtruth-tiny --after my-unlearned --forget-set forget-set.jsonl
memaudit verify --before groundtruth-tiny --after my-unlearned --forget-set forget-set.jsonl --by-reference
memaudit verify --before M --after M --subject-id 3 --subject-id 4 --locality 7 --relearn 3 --json

Submits a verification audit (POST /audits, kind verification) through the one client, waits for it (the nulls it
needs included), and prints each forget-set fact's status: removed, still retrievable or inconclusive."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.client import add_client_arguments, make_client
from app.cli.output import wait
from app.db.vocabulary import AuditStatus
from app.errors import InvalidInput
from app.verification.schemas import MAX_RECORDS

MAX_FILE_BYTES = 64 * 2**20  # 1,500 exported records with their provenance are a few MB
SENT_FIELDS = ("subject_id", "property", "audit_id", "templates")  # what a verification reads of a record


def read_forget_set(path: Path) -> list[dict[str, Any]]:
    """The records of a forget-set file as `memaudit export` / GET /forget-set write it (jsonl or tofu), each
    reduced to the fields a verification reads (no name, value or sentence is sent); the end marker line is
    skipped. A line that is not a JSON object is refused by its number, never its text."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InvalidInput("--forget-set", f"the file is larger than {MAX_FILE_BYTES // 2**20} MB; split it")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(
            "--forget-set", f"cannot read the file ({type(exc).__name__}); give a readable path"
        ) from None
    except UnicodeDecodeError:
        raise InvalidInput(
            "--forget-set", "the file is not UTF-8 text; give the file `memaudit export` wrote"
        ) from None
    records = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise InvalidInput("--forget-set", f"line {n} is not JSON; give the file `memaudit export` wrote") from None
        if not isinstance(row, dict):
            raise InvalidInput("--forget-set", f"line {n} is not a JSON object; give the file `memaudit export` wrote")
        if "_end" in row:
            continue
        records.append({k: row[k] for k in SENT_FIELDS if k in row})
        if len(records) > MAX_RECORDS:
            raise InvalidInput(
                "--forget-set", f"more than {MAX_RECORDS} records: split the forget set, or verify a --batch-id"
            )
    if not records:
        raise InvalidInput("--forget-set", "the file holds no record; export one with `memaudit export`")
    return records


def file_sha256(path: Path) -> str:
    """The SHA-256 of a delivered forget-set file, as its export's evidence entry states it."""
    sha = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(2**20), b""):
                sha.update(block)
    except OSError as exc:
        raise InvalidInput(
            "--forget-set", f"cannot read the file ({type(exc).__name__}); give a readable path"
        ) from None
    return sha.hexdigest()


def payload(args: argparse.Namespace) -> dict[str, Any]:
    if args.by_reference and args.forget_set is None:
        raise InvalidInput("--by-reference", "name the delivered file with --forget-set FILE")
    if args.forget_set is not None and args.by_reference:
        people: dict[str, Any] = {"export_sha256": file_sha256(Path(args.forget_set))}
    elif args.forget_set is not None:
        people = {"forget_set": read_forget_set(Path(args.forget_set))}
    elif args.batch_id is not None:
        people = {"batch_id": args.batch_id}
    elif args.subject_id:
        people = {"subject_ids": args.subject_id}
    else:
        raise InvalidInput("--forget-set", "give --forget-set FILE, --batch-id ID or --subject-id ID (repeatable)")
    options: dict[str, Any] = {"max_p": args.max_p, "held_out": not args.no_held_out}
    if args.relearn:
        options["relearning"] = {
            "subject_ids": args.relearn,
            "steps": args.relearn_steps,
            "texts": args.relearn_on,
            "scope": args.relearn_scope,
        }
        if args.relearn_lr is not None:
            options["relearning"]["lr"] = args.relearn_lr
    return {
        "kind": "verification",
        "model": args.after,
        "before": args.before,
        "people": people,
        "locality": {"subject_ids": args.locality or [], "name_neighbours": args.name_neighbours},
        "options": options,
    }


def _p(x: float | None) -> str:
    return "–" if x is None else f"{x:.2g}"


def print_result(page: dict[str, Any]) -> None:
    s = page.get("summary") or {}
    targets = s.get("targets") or {}
    print(f"verification {page['audit_id']}: {page['before']} (before) -> {page['after']} (after)")
    if page.get("export"):
        ref = page["export"]
        print(f"the forget-set export verified: evidence entry {ref['seq']} (sha256 {ref['sha256']})")
    print(
        f"forget-set facts: {targets.get('facts', 0)}; removed {targets.get('removed', 0)}, still retrievable"
        f" {targets.get('still retrievable', 0)}, inconclusive {targets.get('inconclusive', 0)}"
    )
    over = s.get("over_forgetting")
    if over:
        print(f"over-forgetting (untouched facts retrievable before, not after): {over['k']}/{over['n']}")
        near = (s.get("over_forgetting_by_group") or {}).get("name_neighbours")
        if near:
            print(f"  of them on name neighbours ({s['people']['name_neighbours']} people): {near['k']}/{near['n']}")
    context = s.get("context")
    if context:
        print(
            f"in context (the person's other facts first): rank 1 before {context['before_retrieved']}, after"
            f" {context['after_retrieved']} of {context['facts']}; removed yet given back in context"
            f" {context['removed_but_retrieved']}"
        )
    relearning = s.get("relearning")
    if relearning:
        if relearning["status"] == "unavailable":
            print(f"relearning probe: unavailable ({relearning['reason']})")
        else:
            how = f" ({relearning['steps']} steps, {relearning['scope']} weights)" if "scope" in relearning else ""
            for group in ("relearned", "others"):
                back = relearning[group]["came_back"]
                print(
                    f"relearning probe{how}, {group}: "
                    + (f"{back['k']}/{back['n']} came back" if back else "none removed")
                )
    print(
        f"\n{'subject':>8}  {'property':<8} {'forget set':<10} {'p before':>9} {'p after':>9} {'paired p':>9}  status"
    )
    for f in page["facts"]:
        reason = f" ({f['reason']})" if f.get("reason") else ""
        print(
            f"{f['subject_id']:>8}  {f['property']:<8} {'yes' if f['target'] else 'no':<10}"
            f" {_p(f['before']['p_value']):>9} {_p(f['after']['p_value']):>9} {_p(f['paired_p']):>9}"
            f"  {f['status']}{reason}"
        )


def cmd_verify(args: argparse.Namespace) -> int:
    client = make_client(args)
    audit_id = client.submit(payload(args))
    client.run_queued_work()
    audit = wait(client, audit_id, f"verification of {args.after}", quiet=args.json)
    if audit["status"] != AuditStatus.SUCCEEDED:
        print(f"memaudit: the verification {audit['status']}: {audit.get('error') or ''}", file=sys.stderr)
        return 1
    page = client.verification(audit_id)
    if args.json:
        print(json.dumps(page, indent=2))
    else:
        print_result(page)
    return 0


def add_verify_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify")
    p.add_argument("--before", required=True, help="the model before unlearning (its subject audits are redone)")
    p.add_argument("--after", required=True, help="the unlearned model (a registered name or hf:PATH)")
    p.add_argument("--forget-set", default=None, help="the forget set given to the unlearning (jsonl or tofu)")
    p.add_argument(
        "--by-reference",
        action="store_true",
        help="send the --forget-set file's SHA-256 instead of its records: the service reads the facts from that"
        " export's evidence entry (it must be a file an export of yours delivered, unchanged), and the"
        " verification's evidence entries cite that export",
    )
    p.add_argument("--batch-id", default=None, help="instead: every person of a batch")
    p.add_argument("--subject-id", type=int, action="append", default=None, help="instead: a subject id, repeatable")
    p.add_argument("--locality", type=int, action="append", default=None, help="an untouched subject id, repeatable")
    p.add_argument(
        "--name-neighbours",
        type=int,
        default=0,
        metavar="N",
        help="also up to N name neighbours as untouched people: people you audited on the before model who share a"
        " first or last name with a forgotten one (over-forgetting is reported for them apart)",
    )
    _add_relearning_arguments(p)
    p.add_argument("--max-p", type=float, default=0.01, help="retrievable = p <= max-p against the null")
    p.add_argument("--no-held-out", action="store_true", help="skip the held-out-template probe")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_client_arguments(p)
    p.set_defaults(func=cmd_verify)


def _add_relearning_arguments(p: argparse.ArgumentParser) -> None:
    """The relearning probe's options."""
    p.add_argument(
        "--relearn",
        type=int,
        action="append",
        default=None,
        help="relearning probe: a subject id whose"
        " facts (--relearn-on) the after model is fine-tuned on, repeatable (transformers directories only)",
    )
    p.add_argument("--relearn-steps", type=int, default=20, help="fine-tuning steps of the relearning probe")
    p.add_argument(
        "--relearn-on",
        choices=["other_facts", "forget_set"],
        default="other_facts",
        help="fine-tune on the --relearn people's facts outside the forget set (default) or in it",
    )
    p.add_argument(
        "--relearn-scope",
        choices=["all", "embeddings", "subject"],
        default="all",
        help="weights the relearning probe fine-tunes: all (default), the input embeddings, or subject: only the"
        " rows of the --relearn people's name tokens (where a name-scoped unlearning hides facts)",
    )
    p.add_argument(
        "--relearn-lr", type=float, default=None, help="the probe's learning rate (default: 0.001; 0.03 for subject)"
    )
