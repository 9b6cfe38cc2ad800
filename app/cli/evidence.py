"""`memaudit evidence export [-o FILE]`, `memaudit evidence verify FILE --public-key KEY.pem` and `memaudit evidence
public-key`: the evidence record (app/evidence) out of the service, and checked offline.

`export` and `public-key` read this machine's database and key file (an operator's command, like `keys`), or a
running API with --api-url/--api-key (GET /evidence, GET /evidence/public-key: an admin or regulator key).
`verify` needs nothing but the file and the public key(s): every key that signed part of the chain (after a
rotation, the old public key too)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import TextIO

from app.cli.client import add_client_arguments, raise_for
from app.errors import DomainError


def _remote_lines(url: str, key: str | None, path: str) -> Iterator[str]:
    import httpx

    if not key:
        raise DomainError("a remote API needs a key: --api-key KEY or MEMAUDIT_API_KEY", field="--api-key")
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.stream("GET", url.rstrip("/") + path, headers=headers, timeout=60) as response:
        if response.status_code >= 400:
            response.read()
            raise_for(response)
        yield from response.iter_text()


def _local_lines() -> Iterator[str]:
    from app.cli.client import open_local_database
    from app.db.engine import session_scope
    from app.evidence import service
    from app.settings import get_settings

    open_local_database()
    with session_scope() as s:
        yield from service.export_lines(s, get_settings())


def cmd_export(args: argparse.Namespace) -> int:
    from app.settings import get_settings  # the settings (pydantic) only when the command runs

    settings = get_settings()
    url = args.api_url or settings.api_url
    lines = _remote_lines(url, args.api_key or settings.api_key, "/evidence") if url else _local_lines()
    target: TextIO
    with open(args.output, "w", encoding="utf-8") if args.output else nullcontext(sys.stdout) as target:
        for chunk in lines:
            target.write(chunk)
    if args.output:
        print(f"evidence record written to {args.output}", file=sys.stderr)
    return 0


def cmd_public_key(args: argparse.Namespace) -> int:
    from app.settings import get_settings

    settings = get_settings()
    url = args.api_url or settings.api_url
    if url:
        import json

        sys.stdout.write(
            json.loads("".join(_remote_lines(url, args.api_key or settings.api_key, "/evidence/public-key")))["pem"]
        )
        return 0
    from app.evidence import service

    sys.stdout.write(service.public_key(settings).pem)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from app.evidence import chain

    keys = []
    for path in args.public_key:
        try:
            keys.append(chain.load_public_key(Path(path).read_bytes()))
        except ValueError:
            raise DomainError(
                "not an Ed25519 public key: give the PEM of `memaudit evidence public-key` or the JSON answer of"
                " GET /evidence/public-key",
                field="--public-key",
            ) from None
    with open(args.file, encoding="utf-8") as lines:
        result = chain.verify(lines, keys)
    if result.ok:
        print(f"OK: {result.entries} entries, chained and signed by {len(result.keys_used)} key(s)")
        return 0
    for error in result.errors:
        print(f"FAILED: {error}", file=sys.stderr)
    print(f"the evidence record in {args.file} does not verify", file=sys.stderr)
    return 1


def add_evidence_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evidence")
    es = p.add_subparsers(dest="evidence_command", required=True)
    e = es.add_parser("export", help="write the whole chain as JSON lines (with a signed end line)")
    e.add_argument("-o", "--output", default=None, help="file to write (default: standard output)")
    add_client_arguments(e)
    e.set_defaults(func=cmd_export)
    k = es.add_parser("public-key", help="print the current signing key's public half (PEM)")
    add_client_arguments(k)
    k.set_defaults(func=cmd_public_key)
    v = es.add_parser("verify", help="check an exported chain's hashes, order and signatures, offline")
    v.add_argument("file", help="a file written by `memaudit evidence export` (or GET /evidence)")
    v.add_argument(
        "--public-key",
        action="append",
        required=True,
        metavar="KEY.pem",
        help="a public key that signed entries (the PEM of `memaudit evidence public-key`, or the JSON answer of GET"
        " /evidence/public-key saved as it came); repeat it for each key used since the chain began",
    )
    v.set_defaults(func=cmd_verify)
