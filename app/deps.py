"""Request dependencies: one session per request that commits or rolls back once; the calling principal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Header
from sqlalchemy.orm import Session

from app.auth.keys import Principal, authenticate
from app.db.engine import session_scope
from app.errors import Forbidden
from app.settings import Settings, get_settings


def get_db() -> Iterator[Session]:
    """One unit of work per request: commit on success, roll back on error."""
    with session_scope() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_principal(
    session: SessionDep,
    settings: SettingsDep,
    authorization: Annotated[str | None, Header(description="Bearer <API key or data-subject token>")] = None,
) -> Principal:
    token = None
    if authorization:
        scheme, _, value = authorization.partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else authorization.strip()
    return authenticate(session, settings, token)


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


def require_roles(*roles: str) -> Callable[[Principal], Principal]:
    """A dependency that lets only ``roles`` through (403 naming the roles and the caller's)."""

    def check(principal: CurrentPrincipal) -> Principal:
        if principal.role not in roles:
            raise Forbidden(f"this needs the role {' or '.join(roles)} (you are {principal.role})")
        return principal

    return check


# Who may submit, cancel and erase (audits, datasets, subjects): admins and auditors.
Submitter = Annotated[Principal, Depends(require_roles("admin", "auditor"))]
