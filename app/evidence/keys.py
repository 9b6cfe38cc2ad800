"""The server's evidence signing key: an Ed25519 private key in a PEM file (``MEMAUDIT_EVIDENCE_KEY_FILE``).

Generated on first use when the file is missing, written with mode 0600 and put in place with a hard link, so
that processes starting together (the API and its workers) agree on one key and a reader never sees half a file.
The key is never logged, shown or stored elsewhere; only its public half leaves the process
(GET /evidence/public-key, `memaudit evidence public-key`). Rotation: docs/reliability.md "Evidence"."""

from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.evidence.chain import key_id
from app.settings import Settings

log = logging.getLogger("memaudit.evidence")
_LOCK = threading.Lock()


class KeyFileError(Exception):
    """The key file exists but is not an Ed25519 private key this process may use."""


def _generate(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if another process put its key there first: then that one is the key
        except FileExistsError:
            return
    finally:
        tmp.unlink(missing_ok=True)


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> Ed25519PrivateKey:  # mtime in the key: a rotated file is read again
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError("MEMAUDIT_EVIDENCE_KEY_FILE does not hold an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError("MEMAUDIT_EVIDENCE_KEY_FILE does not hold an Ed25519 key")
    return key


def signing_key(settings: Settings) -> Ed25519PrivateKey:
    path = Path(settings.evidence_key_file).expanduser()
    with _LOCK:
        generated = not path.exists()
        if generated:
            _generate(path)
        key = _load(str(path), path.stat().st_mtime_ns)
    if generated:  # the public key's id only: the key itself is never logged
        log.info("evidence signing key created at %s (mode 0600), key id %s", path, key_id(key.public_key()))
    return key


def public_key_id(settings: Settings) -> str:
    return key_id(signing_key(settings).public_key())
