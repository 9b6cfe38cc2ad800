"""Content digests of files (model weights, GGUF files), computed once per file version."""

from __future__ import annotations

import hashlib
from pathlib import Path

_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's contents, read in 4 MiB blocks and remembered per (resolved path, size, modification
    time): the model loader and the shipped-null lookup both fingerprint the same weights files."""
    stat = path.stat()
    memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo not in _DIGESTS:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        _DIGESTS[memo] = h.hexdigest()
    return _DIGESTS[memo]
