"""The evidence record over HTTP: the whole chain as JSON lines for offline verification (admin, regulator), and
the public key that verifies it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from app.auth.keys import Principal
from app.db.engine import session_factory
from app.db.models.auth import Role
from app.deps import SettingsDep, require_roles
from app.evidence import service
from app.evidence.schemas import PublicKey
from app.settings import Settings
from app.streaming import MEDIA_TYPES, download

router = APIRouter(prefix="/evidence", tags=["evidence"])
READERS = (Role.ADMIN, Role.REGULATOR)
KEY_READERS = tuple(Role)


def _stream(settings: Settings) -> Iterator[str]:
    session = session_factory()()  # a streamed answer outlives the request's session
    try:
        yield from service.export_lines(session, settings)
    finally:
        session.close()


@router.get("", response_class=StreamingResponse)
def export_evidence(
    _: Annotated[Principal, Depends(require_roles(*READERS))], settings: SettingsDep
) -> StreamingResponse:
    """The evidence record (admin, regulator): every entry in chain order as JSON lines (`seq`, `payload` — the
    canonical JSON that `hash` covers —, `hash`, `key_id`, `signature`), then a signed end line
    `{"_end": {"entries": N, "head": ...}}`. Check it offline with `memaudit evidence verify FILE --public-key
    KEY.pem`. Entries hold no personal data: a subject appears as an HMAC."""
    return download(_stream(settings), MEDIA_TYPES["jsonl"], "evidence.jsonl")


@router.get("/public-key", response_model=PublicKey)
def evidence_public_key(
    _: Annotated[Principal, Depends(require_roles(*KEY_READERS))], settings: SettingsDep
) -> PublicKey:
    """The public half of the current signing key (PEM) and its id (entries name the key that signed them)."""
    return service.public_key(settings)
