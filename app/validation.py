"""Input that the database can store, checked in one place: the base of every request body and the bounded types
of query and path parameters.

PostgreSQL refuses NUL characters in text and ``NaN``/``Infinity`` in JSONB, and its integers end at 2^63 - 1
(SQLite's too); such input must be a 422 naming the field, not a 500 from the database. NUL characters in
the path and query string are refused before routing (``app.middleware``), so that every parameter is covered.
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

from app.settings import get_settings

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1
NUL_MESSAGE = "NUL characters (\\0) are not allowed; remove them"
MAX_NESTING = 64  # JSON bodies are bounded in size (max_request_bytes); this bounds the walk's depth too


def unstorable(value: Any) -> str | None:
    """Why `value` (a request field, maybe nested lists and dicts) cannot be stored, or None."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"nested deeper than {MAX_NESTING} levels"
        if isinstance(item, str):
            if "\x00" in item:
                return NUL_MESSAGE
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return "integers must lie between -2^63 and 2^63 - 1"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "numbers must be finite (not NaN or Infinity)"
        elif isinstance(item, dict):
            stack.extend((x, depth + 1) for pair in item.items() for x in pair)
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend((x, depth + 1) for x in item)
    return None


class RequestModel(BaseModel):
    """The base of every request body: unknown fields are refused, values must have the JSON type the document
    states, and every field (nested ones included) must be storable: no NUL characters, finite numbers, 64-bit
    integers. The 422 names the field, never the value."""

    # strict: JSON types as the document states them (pydantic would otherwise read "4" or true as 4, 0 as false).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        if not isinstance(value, BaseModel):  # a nested model checks its own fields
            problem = unstorable(value)
            if problem:
                raise ValueError(problem)
        return value


# Query and path parameters (FastAPI validates them before the handler runs, and documents the bounds).
# Integer ids are 32-bit columns (subjects.id): a larger one is out of range, not missing.
Id = Annotated[int, Path(ge=1, le=INT32_MAX, description="a positive 32-bit integer id")]
IdFilter = Annotated[int | None, Query(ge=1, le=INT32_MAX, description="a positive 32-bit integer id")]
Page = Annotated[int, Query(ge=1, le=INT32_MAX, description="1-based page number")]
Finite = Annotated[float | None, Query(allow_inf_nan=False)]
LIMIT_KEY = "x-limit-from"  # in a JSON schema: {"maximum": "max_page_size"}, filled in by app.openapi


def _page_size(value: int) -> int:
    limit = get_settings().max_page_size
    if value > limit:
        raise ValueError(f"page_size must be between 1 and {limit} (MEMAUDIT_MAX_PAGE_SIZE)")
    return value


PageSize = Annotated[
    int,
    Query(ge=1, description="Items per page", json_schema_extra={LIMIT_KEY: {"maximum": "max_page_size"}}),
    AfterValidator(_page_size),
]


def idempotency_digest(key: str) -> str:
    """What is stored and compared for a client's Idempotency-Key: its SHA-256 (hex). The key is the client's text
    and may hold a name; a hash never reaches the database's log (a unique violation's DETAIL quotes the row)."""
    return hashlib.sha256(key.encode()).hexdigest()


PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")  # what pydantic puts before a validator's own message


def error_message(error: dict[str, Any]) -> str:
    """pydantic's message for one error, without the prefix it adds to a validator's own words ("Value error, give
    the subject's name ..." says "give the subject's name ...")."""
    message = str(error["msg"])
    for prefix in PYDANTIC_PREFIXES:
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message
