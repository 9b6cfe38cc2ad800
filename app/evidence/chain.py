"""The chain's rules, apart from any database: how an entry is hashed and signed, and how an exported chain is
verified offline with the public key(s) alone (`memaudit evidence verify`).

An entry's ``payload`` is canonical JSON (sorted keys, no spaces, UTF-8) holding its sequence number, time,
kind, the previous entry's hash and its body; ``hash`` = SHA-256(payload); ``signature`` = Ed25519 over the hash's
32 bytes. The first entry's previous hash is GENESIS. An export ends with a signed end line that states the
number of entries and the last hash, so that dropping entries from its end is noticed too."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SCHEMA = "memaudit.evidence/1"
GENESIS = "0" * 64
END_KEY = "_end"
MAX_ERRORS = 20  # a verification reports at most this many problems (the first ones)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_pem(public: Ed25519PublicKey) -> str:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def load_public_key(data: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file (``memaudit evidence public-key``) or from the JSON answer of
    ``GET /evidence/public-key`` saved as it came (its ``pem``): either form of the one key, accepted alike."""
    if data.lstrip().startswith(b"{"):
        try:
            pem = json.loads(data)["pem"]
        except (ValueError, KeyError, TypeError):
            raise ValueError("not the JSON answer of GET /evidence/public-key") from None
        if not isinstance(pem, str):
            raise ValueError("its pem is not text")
        data = pem.encode()
    key = serialization.load_pem_public_key(data)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


def sign(private: Ed25519PrivateKey, hash_hex: str) -> str:
    return private.sign(bytes.fromhex(hash_hex)).hex()


def subject_ref(secret: str, subject_id: int) -> str:
    """A keyed hash (HMAC-SHA256) of a subject's reference: links the entries about one person without naming
    them; whoever lacks the secret cannot tell whose entries they are."""
    return hmac.new(secret.encode(), f"memaudit.evidence.subject:{subject_id}".encode(), hashlib.sha256).hexdigest()


def end_statement(entries: int, head: str) -> str:
    """What an export's end line signs: the number of entries and the last hash."""
    return digest(canonical({"schema": SCHEMA, "entries": entries, "head": head}))


@dataclass
class Verification:
    entries: int = 0
    keys_used: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def fail(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)


def _check_signature(
    result: Verification, keys: Mapping[str, Ed25519PublicKey], kid: Any, sig: Any, h: str, where: str
) -> None:
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        result.fail(f"{where}: signed with key {kid!s:.16} that none of the given public keys matches")
        return
    try:
        key.verify(bytes.fromhex(sig), bytes.fromhex(h))
        result.keys_used.add(kid)
    except (InvalidSignature, ValueError, TypeError):
        result.fail(f"{where}: the signature does not match")


def _check_end(
    result: Verification, keys: dict[str, Ed25519PublicKey], end: Any, where: str, prev: str, seq: int
) -> None:
    """The end line: the number of entries and the last hash it states, and its signature."""
    end = end if isinstance(end, dict) else {}
    if end.get("entries") != seq or end.get("head") != prev:
        stated = f"{end.get('entries')!s:.20} entries"
        result.fail(f"{where}: the end line states {stated} and a last hash; the file's {seq} entries differ")
    _check_signature(result, keys, end.get("key_id"), end.get("signature"), end_statement(seq, prev), where)


def _check_entry(
    result: Verification, keys: dict[str, Ed25519PublicKey], row: dict[str, Any], where: str, prev: str, seq: int
) -> tuple[str, int]:
    """One entry: its hash, its payload, its place in the chain and its signature; returns (prev, seq) after it."""
    payload = row.get("payload")
    if not isinstance(payload, str) or digest(payload) != row.get("hash"):
        result.fail(f"{where}: the entry's hash does not match its payload (changed)")
        return "?", seq + 1
    try:
        body = json.loads(payload)
    except json.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        result.fail(f"{where}: the entry's payload is not a JSON object")
        return row["hash"], seq + 1
    seq += 1
    result.entries += 1
    if body.get("seq") != seq:
        result.fail(f"{where}: entry {body.get('seq')} where entry {seq} belongs (an entry missing or moved)")
        seq = body.get("seq") if isinstance(body.get("seq"), int) else seq
    if body.get("prev") != prev and prev != "?":
        result.fail(f"{where}: entry {body.get('seq')} does not follow the entry before it (chain broken)")
    _check_signature(result, keys, row.get("key_id"), row.get("signature"), row["hash"], where)
    return row["hash"], seq


def verify(lines: Iterable[str], public_keys: Iterable[Ed25519PublicKey]) -> Verification:
    """Verify an exported chain (JSON lines, in order, ending with the end line) with the given public keys."""
    keys = {key_id(k): k for k in public_keys}
    result, prev, seq, ended = Verification(), GENESIS, 0, False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        if ended:
            result.fail(f"{where}: text after the end line")
            break
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            result.fail(f"{where}: not JSON")
            prev, seq = "?", seq + 1
            continue
        if not isinstance(row, dict):
            result.fail(f"{where}: not a JSON object")
            continue
        if END_KEY in row:
            ended = True
            _check_end(result, keys, row[END_KEY], where, prev, seq)
            continue
        prev, seq = _check_entry(result, keys, row, where, prev, seq)
    if not ended:
        result.fail("the file has no end line: it was cut short (or entries were dropped from its end)")
    return result
