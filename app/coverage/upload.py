"""Read a multipart upload under a size limit, streaming it to temporary files.

Starlette's form parser keeps each file part in a SpooledTemporaryFile (in memory up to 1 MB, then on
disk); wrapping the request stream with a byte counter stops the upload as soon as it passes the limit,
so neither memory nor disk ever holds more than the limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Request
from starlette.datastructures import FormData
from starlette.formparsers import MultiPartException, MultiPartParser

from app.errors import InvalidInput, PayloadTooLarge

MAX_PARTS = 10


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the upload is larger than the limit of {limit} bytes (MEMAUDIT_MAX_DATASET_UPLOAD_BYTES)")


async def _limited(request: Request, limit: int) -> AsyncIterator[bytes]:
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise _too_large(limit)
        yield chunk


async def read_form(request: Request, limit: int) -> FormData:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _too_large(limit)  # refuse before reading a byte
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidInput("body", "send the dataset as multipart/form-data (fields: name, items, users, interactions)")
    parser = MultiPartParser(request.headers, _limited(request, limit), max_files=3, max_fields=MAX_PARTS)
    try:
        return await parser.parse()
    except MultiPartException as exc:
        raise InvalidInput("body", f"not a valid multipart upload: {exc.message}") from None
