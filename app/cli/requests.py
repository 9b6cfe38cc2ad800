"""memaudit requests ...: a person's request through the API (the CLI is its HTTP client; docs/requests.md).

memaudit requests create --name "Ada Lovelace" --fact P106=mathematician --right access --right erasure \\
    --model groundtruth-tiny --received-at 2026-04-01T09:00:00Z
memaudit requests list [--open]          the officer's queue: state, due date, overdue
memaudit requests identity ID verified   then: audit ID, deliver ID --recipient R --model M, verify ID --audit A,
                                          answer ID; extend ID --reason TEXT; refuse ID --reason TEXT
memaudit requests recipient-add --name unlearning-eu-1 --kind unlearning_pipeline"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from app.cli.audit import _parse_fact
from app.cli.batch import table
from app.cli.client import add_client_arguments, make_client
from app.db.vocabulary import IdentityCheck, RecipientKind, Right


def _create(args: argparse.Namespace) -> dict[str, Any]:
    subject: dict[str, Any] = {"name": args.name, "facts": args.fact}
    if args.wikidata_id:
        subject["wikidata_id"] = args.wikidata_id
    received = args.received_at or datetime.now(UTC).isoformat()
    body = {"subject": subject, "rights": args.right, "models": args.model, "identity_check": args.identity}
    return make_client(args).call("POST", "/requests", json=body | {"received_at": received})


def _act(args: argparse.Namespace) -> dict[str, Any]:
    client, rid = make_client(args), args.id
    bodies = {
        "identity": lambda: ("identity", {"status": args.status}),
        "extend": lambda: ("extension", {"reason": args.reason}),
        "refuse": lambda: ("refusal", {"reason": args.reason}),
        "audit": lambda: ("audits", {}),
        "deliver": lambda: ("deliveries", {"recipient_id": args.recipient, "model": args.model}),
        "verify": lambda: ("verification", {"audit_id": args.audit}),
        "answer": lambda: ("answer", None),
    }
    path, body = bodies[args.requests_command]()
    return client.call("POST", f"/requests/{rid}/{path}", **({"json": body} if body is not None else {}))


def cmd_requests(args: argparse.Namespace) -> int:
    command = args.requests_command
    if command == "list":
        page = make_client(args).call("GET", "/requests", params={"open": args.open, "page_size": 200})
        if args.json:
            print(json.dumps(page))
            return 0
        rows = [
            [r["id"][:8], r["state"], r["due_at"][:16], "overdue" if r["overdue"] else str(r["days_left"])]
            for r in page["items"]
        ]
        print(table(rows, ["request", "state", "due (UTC)", "days left"]) if rows else "no request")
        return 0
    if command == "show":
        answer = make_client(args).call("GET", f"/requests/{args.id}")
    elif command == "create":
        answer = _create(args)
    elif command == "recipient-add":
        body = {"name": args.name, "kind": args.kind, "models": args.model}
        answer = make_client(args).call("POST", "/recipients", json=body)
    elif command == "recipients":
        answer = make_client(args).call("GET", "/recipients")
    else:
        answer = _act(args)
    print(json.dumps(answer, indent=2))
    return 0


def add_request_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("requests")
    rs = p.add_subparsers(dest="requests_command", required=True)
    c = rs.add_parser("create", help="record a person's request as received (due one calendar month later)")
    c.add_argument("--name", required=True, help="the person's name")
    c.add_argument("--fact", action="append", type=_parse_fact, default=[], help="PROPERTY=VALUE (repeatable)")
    c.add_argument("--wikidata-id", default=None)
    c.add_argument("--right", action="append", required=True, choices=[r.value for r in Right])
    c.add_argument("--model", action="append", required=True, help="a model concerned (repeatable)")
    c.add_argument("--identity", default="pending", choices=[i.value for i in IdentityCheck])
    c.add_argument("--received-at", default=None, help="ISO 8601 with its zone (default: now)")
    ls = rs.add_parser("list", help="the officer's queue, soonest due first")
    ls.add_argument("--open", action="store_true", help="only requests neither answered nor refused")
    ls.add_argument("--json", action="store_true")
    r = rs.add_parser("recipient-add", help="register a recipient of forget sets (Art. 19)")
    r.add_argument("--name", required=True)
    r.add_argument("--kind", required=True, choices=[k.value for k in RecipientKind])
    r.add_argument("--model", action="append", default=[])
    parsers = [c, ls, r, rs.add_parser("recipients", help="the registered recipients")]
    for name, text in (
        ("show", "one request"),
        ("audit", "audit the person on each model"),
        ("answer", "mark answered"),
    ):
        parsers.append(one := rs.add_parser(name, help=text))
        one.add_argument("id")
    for name, text, extra in (
        ("identity", "the identity check's outcome", ("status", {"choices": ["verified", "failed"]})),
        ("extend", "the one extension (+2 months), within the first month", ("--reason", {"required": True})),
        ("refuse", "refuse the request, with a reason", ("--reason", {"required": True})),
        (
            "deliver",
            "deliver the forget set of the audit on --model to --recipient",
            ("--recipient", {"required": True}),
        ),
        ("verify", "record a succeeded verification audit", ("--audit", {"required": True})),
    ):
        parsers.append(one := rs.add_parser(name, help=text))
        one.add_argument("id")
        one.add_argument(extra[0], **extra[1])
        if name == "deliver":
            one.add_argument("--model", required=True)
    for parser in parsers:
        add_client_arguments(parser)
        parser.set_defaults(func=cmd_requests)
