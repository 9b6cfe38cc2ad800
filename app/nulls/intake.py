"""``POST /nulls/import`` off the API process: a file is checked from a small prefix and its inflated size counted
(nothing parsed) in the API, then parsed, validated and stored by a short-lived child process.

Why a process: ``json.loads`` and the canonical dump that hashes a document hold the GIL for as long as they run
(a 73 KB gzip inflating to 67 MB of JSON held it 17.6 s: ``GET /health`` waited as long, the event loop with it).
A thread does not help there; a process does, and its memory is returned when it exits. The checks in the API
cost little: inflating releases the GIL, and only ``PREFIX_BYTES`` of the inflated text are kept and read.

The child is ``python -c BOOT [MODEL]`` (``child_command``: at a lower CPU priority from its first line, then this
module as ``python -m app.nulls.intake [MODEL]``): the file on stdin, one JSON line on stdout, either
``{"audit_id": ..., "created": ...}`` or ``{"error": {"status", "message", "field"}}`` (a ``DomainError``)."""

from __future__ import annotations

import codecs
import json
import os
import sys
import zlib
from pathlib import Path
from typing import Any

import anyio

from app.errors import DomainError, InvalidInput, PayloadTooLarge
from app.nulls.artifact import FORMAT, INFLATION, MAX_JSON_BYTES, OPTIONAL_COLUMNS, fact_columns
from app.settings import Settings
from core.measures.null import STATISTIC
from core.names.fictitious import GENERATOR

PREFIX_BYTES = 64 * 1024  # inflated bytes read before anything is parsed
CHUNK_BYTES = 1024 * 1024  # inflated at a time while counting
TOP_KEYS = frozenset({"cost", "distributions", "format", "generator", "model", "options", "seed", "statistic"})
EXPECTED = {"format": FORMAT, "statistic": STATISTIC, "generator": GENERATOR}
CHILD_SECONDS = 600.0  # a child parsing and storing one file longer than this is stopped (500)
IMPORTS_AT_ONCE = 2  # child processes at once (each holds a parsed file)
CHILD_NICENESS = 10  # the child's CPU priority below the API's
_limiter: anyio.CapacityLimiter | None = None
_decoder = json.JSONDecoder()
NOT_A_NULL = "not a null artifact (gzip JSON): send a file `memaudit nulls export` wrote"


def ceiling(settings: Settings) -> int:
    return min(MAX_JSON_BYTES, INFLATION * settings.max_null_artifact_bytes)


def inflated_prefix(data: bytes, limit: int) -> bytes:
    """The first ``PREFIX_BYTES`` of the file's JSON, once the whole file is known to inflate to at most ``limit``
    bytes (413 past it) and to be whole (422 when cut short or not gzip). Nothing but the prefix is kept."""
    if data[:2] != b"\x1f\x8b":
        if len(data) > limit:
            raise PayloadTooLarge(f"the file is larger than {limit} bytes", field="body")
        return data[:PREFIX_BYTES]
    inflater, head, size, pending = zlib.decompressobj(wbits=31), b"", 0, data
    try:
        while True:
            chunk = inflater.decompress(pending, CHUNK_BYTES)
            size += len(chunk)
            if len(head) < PREFIX_BYTES:
                head += chunk[: PREFIX_BYTES - len(head)]
            if size > limit:
                raise PayloadTooLarge(f"the file inflates past {limit} bytes", field="body")
            pending = inflater.unconsumed_tail
            if not pending:
                break
    except zlib.error:
        raise InvalidInput("body", "not a readable gzip file: send a file `memaudit nulls export` wrote") from None
    if not inflater.eof:
        raise InvalidInput("body", "the gzip file is cut short: send the whole file")
    return head


def check_prefix(head: bytes) -> None:
    """422 unless the prefix reads as the start of a null artifact: a JSON object whose keys are an artifact's,
    whose format, statistic and generator (where the prefix holds them) are this version's, and whose first
    distribution's columns (where it holds them) are those of a null fact."""
    whole = len(head) < PREFIX_BYTES  # the prefix is the whole file: a value it cuts short is an error
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=whole)
    except UnicodeDecodeError:
        raise InvalidInput("body", NOT_A_NULL) from None
    at = _skip(text, 0)
    if not text.startswith("{", at):
        raise InvalidInput("body", NOT_A_NULL)
    at = _skip(text, at + 1)
    while at < len(text) and text[at] != "}":
        key, at = _value(text, at, whole)
        if key is None:
            return  # the prefix ends inside the key: nothing more to read
        if key not in TOP_KEYS:
            raise InvalidInput("body", f"{NOT_A_NULL} (it has a field {FORMAT} files do not have)")
        at = _skip(text, _skip(text, at) + 1)  # past the colon
        if key == "distributions":
            _check_first_columns(text, at, whole)
        value, end = _value(text, at, whole)
        if end == at:
            return  # the prefix ends inside this value
        if key in EXPECTED and value != EXPECTED[key]:
            raise InvalidInput(key, f"not this version's {key} ({EXPECTED[key]}): export it with this memaudit version")
        at = _skip(text, end)
        at = _skip(text, at + 1) if text.startswith(",", at) else at


def _check_first_columns(text: str, at: int, whole: bool) -> None:
    if not text.startswith("[", at):
        raise InvalidInput("distributions", "a list of distributions (one per property)")
    at = _skip(text, at + 1)
    if not text.startswith("{", at):
        return
    key, end = _value(text, _skip(text, at + 1), whole)
    if key != "columns":
        return
    columns, after = _value(text, _skip(text, _skip(text, end) + 1), whole)
    wanted = set(fact_columns())
    required = wanted - set(OPTIONAL_COLUMNS)  # a file from before an optional column still imports (artifact.py)
    given = set(map(str, columns)) if isinstance(columns, list) else None
    if after > end and (given is None or not required <= given <= wanted):
        raise InvalidInput("distributions[0].columns", "not the columns of a null fact this version stores")


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _value(text: str, at: int, whole: bool) -> tuple[Any, int]:
    """The JSON value at ``at`` and the index after it; (None, at) when the prefix ends before the value does."""
    try:
        return _decoder.raw_decode(text, at)
    except json.JSONDecodeError as exc:
        if not whole and (exc.pos >= len(text) - 1 or exc.msg.startswith("Unterminated string")):
            return None, at
        raise InvalidInput("body", NOT_A_NULL) from None
    except RecursionError:
        raise InvalidInput("body", NOT_A_NULL) from None


async def import_file(data: bytes, model: str | None, settings: Settings) -> tuple[str, bool]:
    """Check the file here (size, prefix), then parse, validate and store it in a child process."""
    if len(data) > settings.max_null_artifact_bytes:
        raise PayloadTooLarge(f"the file is larger than {settings.max_null_artifact_bytes} bytes", field="body")
    check_prefix(await anyio.to_thread.run_sync(inflated_prefix, data, ceiling(settings)))
    global _limiter
    if _limiter is None:  # made in the server's event loop, on first use
        _limiter = anyio.CapacityLimiter(IMPORTS_AT_ONCE)
    root = str(Path(__file__).resolve().parents[2])  # the child runs this code, wherever it is installed or checked out
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    async with _limiter:
        with anyio.fail_after(CHILD_SECONDS):
            done = await anyio.run_process(child_command(model), input=data, env=env, check=False)
    return _answer(done.returncode, done.stdout)


def child_command(model: str | None, module: str = "app.nulls.intake") -> list[str]:
    """``python -c BOOT``: the child lowers its CPU priority (CHILD_NICENESS) before it imports anything, then runs
    ``module`` as ``python -m`` would. Its imports (the web stack, SQLAlchemy: about 2 CPU-s) ran at the API's
    priority before, on a 2-core machine beside the API's own answers."""
    boot = (
        "import os, runpy, sys\n"
        f"hasattr(os, 'nice') and os.nice({CHILD_NICENESS})\n"
        f"sys.argv[0] = {module!r}\n"
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
    )
    return [sys.executable, "-c", boot, model or ""]


def _answer(returncode: int, stdout: bytes) -> tuple[str, bool]:
    try:
        out = json.loads(stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):  # its stderr may name a row's values: not logged
        raise RuntimeError(f"the null import process ended with code {returncode} and no answer") from None
    if "error" in out:
        error = DomainError(out["error"]["message"], field=out["error"]["field"])
        error.status_code = out["error"]["status"]
        raise error
    return out["audit_id"], out["created"]


def main() -> int:
    """The child: the file on stdin, the model (or "") as the argument; one JSON line out."""
    from app.db.engine import session_scope
    from app.nulls.artifact import import_bytes
    from app.settings import get_settings

    data = sys.stdin.buffer.read()
    model = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None
    try:
        with session_scope() as session:
            audit_id, created = import_bytes(session, data, model, get_settings())
    except DomainError as exc:
        error = {"status": exc.status_code, "message": exc.message, "field": exc.field}
        print(json.dumps({"error": error}))
        return 0
    print(json.dumps({"audit_id": audit_id, "created": created}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
