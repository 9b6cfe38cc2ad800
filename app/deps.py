"""Request dependencies: one session per request that commits or rolls back once; the calling principal."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.auth.keys import MISSING_KEY, Principal
from app.db.engine import session_scope
from app.db.models.auth import Role
from app.errors import DomainError, Forbidden, Unauthorized
from app.settings import Settings, get_settings


def get_db() -> Iterator[Session]:
    """One unit of work per request: commit on success, roll back on error."""
    with session_scope() as session:
        yield session


# scope="function": the commit runs when the endpoint returns, before the response is sent. FastAPI's default for a
# dependency with yield ends it after the response was sent: a client got 201 with a new id before the row was
# committed (an upload's dataset read as absent by the request that followed: CI, tests/ui/test_dashboard.py), and a
# failed commit would have followed a success already sent. A streamed body reads in a session of its own.
SessionDep = Annotated[Session, Depends(get_db, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]


# Documents the bearer scheme in OpenAPI; the key itself is read and checked by app.middleware.RequestGuard,
# before the body, in a transaction of its own.
bearer = HTTPBearer(auto_error=False, description="An API key (mak_…) or a data subject's token (mas_…)")


def get_principal(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
    found = getattr(request.state, "principal", None)  # set by RequestGuard when a token was sent
    if isinstance(found, Principal):
        return found
    raise found if isinstance(found, DomainError) else Unauthorized(MISSING_KEY)


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


def require_roles(*roles: str) -> Callable[[Principal], Principal]:
    """A dependency that lets only ``roles`` through (403 naming the roles and the caller's)."""

    def check(principal: CurrentPrincipal) -> Principal:
        if principal.role not in roles:
            raise Forbidden(f"this needs the role {' or '.join(roles)} (you are {principal.role})")
        return principal

    return check


# Who may submit, cancel and erase (audits, datasets, subjects): admins and auditors.
SUBMITTERS = (Role.ADMIN, Role.AUDITOR)
# Who reads batches (an auditor its own key's; admins and regulators every one; a pipeline key none).
BATCH_READERS = (Role.ADMIN, Role.AUDITOR, Role.REGULATOR)
# Who reads a person's requests (an auditor its own key's; admins and regulators every one).
REQUEST_READERS = (Role.ADMIN, Role.AUDITOR, Role.REGULATOR)
Submitter = Annotated[Principal, Depends(require_roles(*SUBMITTERS))]
