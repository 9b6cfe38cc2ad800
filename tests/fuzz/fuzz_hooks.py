"""Schemathesis hooks for tests/fuzz/test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

POST /nulls/import takes a null artifact as `application/gzip` (memaudit.null/1), a media type schemathesis has no
generator for: it gets gzip-compressed arbitrary bytes (the decompressed body is then not a valid artifact: a 4xx
naming the field) and arbitrary bytes that are not gzip at all (a 4xx saying so)."""

import gzip

import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.media_type(
    "application/gzip", st.one_of(st.binary(max_size=2048).map(gzip.compress), st.binary(max_size=256))
)
