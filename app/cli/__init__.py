"""The `memaudit` command line: serve, worker, migrate, keys, audit, export, demo, datasets, capacity, batch.

Commands that read or submit audits go through one client (app/cli/client.py): this machine's database and queue
by default (the API called in-process), a running API with --api-url/--api-key. What they make locally belongs to the
API key `cli`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from app.auth import keys
from app.auth.keys import CLI_KEY_PREFIX
from app.cli.audit import add_audit_commands
from app.cli.batch import add_batch_commands
from app.cli.capacity import add_capacity_commands
from app.cli.client import open_local_database
from app.cli.coverage import add_dataset_commands
from app.cli.demo import add_demo_command
from app.cli.evidence import add_evidence_commands
from app.cli.output import setup_logging
from app.cli.wikidata import add_wikidata_commands
from app.db.engine import session_scope
from app.errors import DomainError
from app.migrate import migrate
from app.settings import get_settings

Configure = Callable[[argparse._SubParsersAction], None]


def _redacted_url() -> str:
    return make_url(get_settings().database_url).render_as_string(hide_password=True)


def cmd_migrate(_: argparse.Namespace) -> int:
    migrate()
    open_local_database()  # the CLI's own api_keys row, so `keys list` and admins see who made local audits
    print("database is at the latest schema:", _redacted_url())
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn  # only `serve` needs the web server

    settings = get_settings()
    if settings.database_url.startswith("sqlite"):
        migrate()  # embedded default: one command gives a working service
    mode = f"Redis queue at {settings.redis_url}" if settings.redis_url else "embedded in-process worker"
    print(f"memaudit API on http://{args.host}:{args.port} ({mode}; database {_redacted_url()})", flush=True)
    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level=args.log_level)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from workers.worker import run_worker  # workers import torch; the rest of the CLI does not need it

    return run_worker(burst=args.burst, preload=args.preload)


def cmd_keys(args: argparse.Namespace) -> int:
    settings = get_settings()
    open_local_database()
    with session_scope() as s:
        if args.keys_command == "create":
            key, token = keys.create_key(s, settings, args.role, args.name or "")
            print(json.dumps({"id": key.id, "role": key.role, "name": key.name, "key": token}))
            print("Store this key now: only its hash is kept.", file=sys.stderr)
        elif args.keys_command == "list":
            for k in keys.list_keys(s):
                note = {"note": "the local command line's key: valid inside a memaudit command's own process only"}
                print(
                    json.dumps(
                        {
                            "id": k.id,
                            "role": k.role,
                            "name": k.name,
                            "revoked": k.revoked,
                            "created_at": k.created_at.isoformat(),
                            **(note if k.prefix == CLI_KEY_PREFIX else {}),
                        }
                    )
                )
        elif args.keys_command == "revoke":
            if not keys.revoke_key(s, args.id):
                raise DomainError(f"no key with id {args.id}", field="id")
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
COMMANDS: list[Configure] = [
    _core_commands,
    add_audit_commands,
    add_demo_command,
    add_wikidata_commands,
    add_dataset_commands,
    add_capacity_commands,
    add_batch_commands,
    add_evidence_commands,
]


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" after every option that has a default worth saying (not for off-by-default flags, and
    not twice when the help text already states it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """Every (sub)command's --help shows the defaults; -v/--verbose is accepted after any command too."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show library messages, progress bars and tracebacks (default: quiet)",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="memaudit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for configure in COMMANDS:
        configure(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    verbose = getattr(args, "verbose", False)
    setup_logging(verbose, service=args.command in ("serve", "worker"))
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
    except BrokenPipeError:  # `memaudit export | head`: the reader has gone, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("memaudit: interrupted (a running audit was cancelled)", file=sys.stderr)
        return 130
    except (SQLAlchemyError, OSError) as exc:  # the environment, not the input: say what, one line
        if verbose:
            raise
        print(
            f"memaudit: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            "(run with -v for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
