"""The `memaudit` command line.

Commands that read or submit audits go through one client (app/cli/client.py): this machine's database and queue
by default (the API called in-process), a running API with --api-url/--api-key. What they make locally belongs to the
API key `cli`."""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
from typing import Any

from app.db.vocabulary import Role
from app.errors import DomainError

# Every command: what `memaudit --help` says of it, and the function that adds its parser ("module:function", called
# with the subparsers). Only the command being run is imported, so `memaudit --help` loads no web framework,
# database or model library (docs/benchmarks.md, "CLI start-up"). Feature packages add their commands here, one line
# each; a function may add several commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("run the HTTP API (embedded worker unless MEMAUDIT_REDIS_URL is set)", "app.cli:_core_commands"),
    "worker": ("run an RQ worker that keeps loaded models in memory across jobs", "app.cli:_core_commands"),
    "migrate": ("create or upgrade the database schema", "app.cli:_core_commands"),
    "keys": ("manage API keys", "app.cli:_core_commands"),
    "audit": ("audit one subject: what does the model know about this person?", "app.cli.audit:add_audit_commands"),
    "export": ("export the forget set (memorized facts)", "app.cli.audit:add_audit_commands"),
    "properties": ("the properties a subject audit can probe (the catalog)", "app.cli.audit:add_audit_commands"),
    "demo": (
        "audit well-known people on the default model and write a forget set",
        "app.cli.demo:add_demo_command",
    ),
    "import-wikidata": (
        "load humans, their facts, property metadata and counterfactual pools from a Wikidata JSON dump "
        "(.json, .json.gz, .json.bz2); re-running on the same file resumes an interrupted import",
        "app.cli.wikidata:add_wikidata_commands",
    ),
    "datasets": (
        "datasets for coverage probes (Di Palma et al. 2025)",
        "app.cli.coverage:add_dataset_commands",
    ),
    "capacity": (
        "capacity audits: plot, grid table, scaling-law prediction",
        "app.cli.capacity:add_capacity_commands",
    ),
    "batch": ("audit a roster of people (a cohort) at once", "app.cli.batch:add_batch_commands"),
    "requests": (
        "a person's request: intake, deadline, audits, deliveries to recipients, answer",
        "app.cli.requests:add_request_commands",
    ),
    "evidence": (
        "the signed evidence record: export it, verify an export offline",
        "app.cli.evidence:add_evidence_commands",
    ),
    "nulls": (
        "a null calibration as a file: export one, import one (admin), ship the package's",
        "app.cli.nulls:add_null_commands",
    ),
    "verify": (
        "did the forgetting work? check an unlearned model against its forget set",
        "app.cli.verify:add_verify_command",
    ),
}


def _redacted_url() -> str:
    from sqlalchemy.engine import make_url

    from app.settings import get_settings

    return make_url(get_settings().database_url).render_as_string(hide_password=True)


def cmd_migrate(_: argparse.Namespace) -> int:
    from app.cli.client import open_local_database
    from app.migrate import import_shipped_nulls, migrate

    before, after = migrate()
    open_local_database()  # the CLI's own api_keys row, so `keys list` and admins see who made local audits
    print(migrate_line(before, after), _redacted_url())
    if models := import_shipped_nulls():
        print(f"imported the nulls shipped for {', '.join(models)} (p-values from the first audit on)")
    return 0


def migrate_line(before: set[str], after: set[str]) -> str:
    """What `memaudit migrate` did, in words: created, upgraded, or found the schema current."""
    if not before:
        return "created the database at the latest schema:"
    if before != after:
        return "upgraded the database to the latest schema:"
    return "the database was already at the latest schema:"


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn  # only `serve` needs the web server

    from app.migrate import import_shipped_nulls, migrate
    from app.settings import get_settings

    settings = get_settings()
    if settings.database_url.startswith("sqlite"):
        migrate()  # embedded default: one command gives a working service
        import_shipped_nulls()  # at start-up, not inside the first submission
    mode = f"Redis queue at {settings.redis_url}" if settings.redis_url else "embedded in-process worker"
    print(f"memaudit API on http://{args.host}:{args.port} ({mode}; database {_redacted_url()})", flush=True)
    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level=args.log_level)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    import logging

    from workers.worker import run_worker  # workers import torch; the rest of the CLI does not need it

    code = run_worker(burst=args.burst, preload=args.preload)
    # The worker stopped (its job finished, RQ unregistered it, the reconciler joined): nothing is left to release
    # that the OS does not. The interpreter's teardown of torch and transformers took ~2 CPU-s, 5-7 s at load 9,
    # after every stop (docs/benchmarks.md), so flush the logs and leave.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cmd_keys(args: argparse.Namespace) -> int:
    from app.auth import keys
    from app.cli.client import open_local_database
    from app.db.engine import session_scope
    from app.settings import get_settings

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
                            **(note if k.prefix == keys.CLI_KEY_PREFIX else {}),
                        }
                    )
                )
        elif args.keys_command == "revoke":
            if not keys.revoke_key(s, args.id):
                raise DomainError(f"no key with id {args.id}", field="id")
            print(f"key {args.id} revoked")
    return 0


def _core_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("worker")
    p.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    p.add_argument("--preload", action="append", default=[], help="model name to load before taking jobs")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("migrate")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("keys")
    ks = p.add_subparsers(dest="keys_command", required=True)
    c = ks.add_parser("create", help="create a key (printed once)")
    c.add_argument("--role", required=True, choices=[role.value for role in Role])
    c.add_argument("--name", default="")
    ks.add_parser("list", help="list keys (never the secrets)")
    r = ks.add_parser("revoke", help="revoke a key")
    r.add_argument("id", type=int)
    p.set_defaults(func=cmd_keys)


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

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show library messages, progress bars and tracebacks (default: quiet)",
        )


class _Commands:
    """The subparsers as a command's function sees them: ``add_parser`` gives a real parser (with the help COMMANDS
    says) for the commands being built, a throwaway one for the others that function adds."""

    def __init__(self, sub: argparse._SubParsersAction, built: set[str]) -> None:
        self.sub, self.built = sub, built

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name not in COMMANDS:
            raise RuntimeError(f"command {name!r} is not listed in app.cli.COMMANDS")
        if "help" in kwargs:
            raise RuntimeError(f"command {name!r}: its help is said once, in app.cli.COMMANDS")
        if name not in self.built:
            return Parser(prog=name)
        return self.sub.add_parser(name, help=COMMANDS[name][0], description=COMMANDS[name][0], **kwargs)


def description() -> str:
    """`memaudit --help`'s text: every command, named from COMMANDS (a list written by hand fell behind it)."""
    first, _, rest = (__doc__ or "").partition("\n\n")
    return f"{first.rstrip('.')}: {', '.join(COMMANDS)}.\n\n{rest}"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """`memaudit`'s parser: every command listed, with the arguments of ``command`` only (of every command when
    None), importing only the modules that add them."""
    parser = Parser(prog="memaudit", description=description(), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    built = set(COMMANDS) if command is None else {command} & set(COMMANDS)
    for name, (text, _) in COMMANDS.items():
        if name not in built:
            sub.add_parser(name, help=text, description=text)
    for target in dict.fromkeys(COMMANDS[name][1] for name in COMMANDS if name in built):  # each function once
        module, _, function = target.partition(":")
        getattr(importlib.import_module(module), function)(_Commands(sub, built))
    return parser


def command_of(argv: list[str]) -> str:
    """The command an argument list runs: its first argument that is not an option (`memaudit`'s own options, -h and
    -v, take no value); "" for none."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(command_of(argv)).parse_args(argv)
    verbose = getattr(args, "verbose", False)
    from app.cli.output import setup_logging

    setup_logging(verbose, service=args.command in ("serve", "worker"))
    try:
        return int(args.func(args) or 0)
    except DomainError as exc:
        where = f"{exc.field}: " if exc.field else ""
        print(f"memaudit: {where}{exc.message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `memaudit export | head`: the reader has gone, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("memaudit: interrupted (a running audit was cancelled)", file=sys.stderr)
        return 130
    except Exception as exc:
        from pydantic import ValidationError
        from sqlalchemy.exc import SQLAlchemyError

        from app.validation import error_message

        if isinstance(exc, ValidationError):
            for err in exc.errors():
                field = ".".join(str(p) for p in err["loc"])
                print(f"memaudit: {field}: {error_message(err)}", file=sys.stderr)
            return 2
        if verbose or not isinstance(exc, (SQLAlchemyError, OSError)):
            raise
        # the environment, not the input: say what, one line
        print(
            f"memaudit: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            "(run with -v for the traceback)",
            file=sys.stderr,
        )
        return 1
    finally:
        # What the command loaded (a model, transformers, the catalog, nulls) stays until the interpreter exits, whose
        # last garbage collection walked all of it: 9 s after `memaudit audit` printed its table (31 s under load).
        # Frozen objects are left out of that collection; the process frees its memory on exit anyway.
        gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
