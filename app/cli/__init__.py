"""The `memaudit` command line: serve, worker, migrate, keys, audit, export, demo."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable

from app.cli.audit import add_audit_commands
from app.cli.capacity import add_capacity_commands
from app.cli.coverage import add_dataset_commands
from app.cli.wikidata import add_wikidata_commands
from app.settings import get_settings

Configure = Callable[[argparse._SubParsersAction], None]


def cmd_migrate(_: argparse.Namespace) -> int:
    from app.migrate import migrate

    migrate()
    print("database is at the latest schema:", _redacted_url())
    return 0


def _redacted_url() -> str:
    from sqlalchemy.engine import make_url

    return make_url(get_settings().database_url).render_as_string(hide_password=True)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.migrate import migrate

    settings = get_settings()
    if settings.database_url.startswith("sqlite"):
        migrate()  # embedded default: one command gives a working service
    mode = f"Redis queue at {settings.redis_url}" if settings.redis_url else "embedded in-process worker"
    print(f"memaudit API on http://{args.host}:{args.port} ({mode}; database {_redacted_url()})", flush=True)
    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level=args.log_level)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from workers.worker import run_worker

    return run_worker(burst=args.burst, preload=args.preload)


def cmd_keys(args: argparse.Namespace) -> int:
    from app.auth import keys
    from app.db.engine import session_scope

    settings = get_settings()
    if settings.database_url.startswith("sqlite"):
        from app.migrate import migrate

        migrate()  # embedded default: a fresh machine has no schema yet
    with session_scope() as s:
        if args.keys_command == "create":
            key, token = keys.create_key(s, settings, args.role, args.name or "")
            print(json.dumps({"id": key.id, "role": key.role, "name": key.name, "key": token}))
            print("Store this key now: only its hash is kept.", file=sys.stderr)
        elif args.keys_command == "list":
            for k in keys.list_keys(s):
                print(json.dumps({"id": k.id, "role": k.role, "name": k.name, "revoked": k.revoked,
                                  "created_at": k.created_at.isoformat()}))
        elif args.keys_command == "revoke":
            if not keys.revoke_key(s, args.id):
                print(f"no key with id {args.id}", file=sys.stderr)
                return 1
            print(f"key {args.id} revoked")
    return 0


def _core_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the HTTP API (embedded worker unless MEMAUDIT_REDIS_URL is set)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("worker", help="run an RQ worker that keeps loaded models in memory across jobs")
    p.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    p.add_argument("--preload", action="append", default=[], help="model name to load before taking jobs")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("migrate", help="create or upgrade the database schema")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("keys", help="manage API keys")
    ks = p.add_subparsers(dest="keys_command", required=True)
    c = ks.add_parser("create", help="create a key (printed once)")
    c.add_argument("--role", required=True, choices=["admin", "auditor", "regulator", "pipeline"])
    c.add_argument("--name", default="")
    ks.add_parser("list", help="list keys (never the secrets)")
    r = ks.add_parser("revoke", help="revoke a key")
    r.add_argument("id", type=int)
    p.set_defaults(func=cmd_keys)


# Feature packages add their commands here, one line each.
COMMANDS: list[Configure] = [_core_commands, add_audit_commands, add_wikidata_commands, add_dataset_commands,
                             add_capacity_commands]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memaudit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for configure in COMMANDS:
        configure(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "transformers", "urllib3", "alembic.runtime.plugins", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    from pydantic import ValidationError

    from app.errors import DomainError

    try:
        return int(args.func(args) or 0)
    except DomainError as exc:
        where = f"{exc.field}: " if exc.field else ""
        print(f"memaudit: {where}{exc.message}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            print(f"memaudit: {field}: {err['msg']}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
