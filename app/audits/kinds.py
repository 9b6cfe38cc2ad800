"""What an audit kind brings, and the registry of kinds.

Each kind package declares one ``KIND = AuditKind(...)`` (in ``<package>/kind.py``); the composition root
(``app/kinds.py``) lists them. The generic audits code reads kinds only through a :class:`KindRegistry` and names
none of them, so adding a kind edits no file here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.db.models import Audit
from app.queue import batch_lane
from app.settings import Settings

Prepare = Callable[[Session, Any, Audit, Settings], None]


@dataclass(frozen=True)
class KindPage:
    """A kind's section of its audit's dashboard page. ``build(session, principal, audit, page)`` reads a succeeded
    audit's results through the kind's own service (access log included) and returns the template's context, under
    ``results``; ``template`` is a Jinja template: a name under app/ui/templates (``kinds/subject.html``) or the
    absolute path of a file (a plug-in kind keeps its page beside its code)."""

    build: Callable[[Session, Any, Audit, int], dict[str, Any]]
    template: str
    # Plain words on what this kind of audit is, shown at the top of its page whatever its status.
    about: str = ""


def _no_links(_: Audit) -> dict[str, str]:
    return {}


def _body_options(body: Any) -> dict[str, Any]:
    return body.options.model_dump(mode="json")


@dataclass(frozen=True)
class AuditKind:
    """One kind of audit, described once.

    ``create`` is the POST /audits body (its ``kind: Literal[name]`` field discriminates the union of kinds);
    ``stored_options(body)`` is what the audit row keeps as ``options`` and ``options`` the model the job receives,
    validated from it. ``prepare(session, body, audit, settings)`` validates the body against the database and
    creates the kind's own rows (raising a DomainError, a 4xx, for bad input) before the job is enqueued by the
    dotted path ``job``. ``links(audit)`` names the result pages, as paths relative to ``/audits/{id}/`` that the
    kind's own ``routers`` serve for that audit."""

    name: str
    create: type[BaseModel]
    options: type[BaseModel]
    prepare: Prepare
    job: str
    routers: tuple[APIRouter, ...] = ()
    links: Callable[[Audit], dict[str, str]] = _no_links
    stored_options: Callable[[Any], dict[str, Any]] = _body_options
    # `model` values the kind itself understands besides registered models (e.g. capacity's "scratch").
    own_models: tuple[str, ...] = ()
    # The audit is about one data subject: the submitter gets a token that reads this audit only, to hand over.
    subject_token: bool = False
    # Work before the request's transaction (outbound calls), so that it holds no database connection.
    prefetch: Callable[[Any, Settings], None] | None = None
    # Background work the service starts itself (a null): its jobs wait on a batch lane, behind single audits.
    background: bool = False
    # The largest POST /audits body of this kind, in bytes (None: MEMAUDIT_MAX_REQUEST_BYTES): a larger one is
    # refused (413) before it is validated (app/audits/body.py). Set it to what the kind's schema can need.
    max_body_bytes: int | None = None
    # Its results' section of the dashboard's audit page (none: the page shows status, progress and options only).
    page: KindPage | None = None

    def lane(self, settings: Settings, batch_id: str | None = None, owner_key_id: int | None = None) -> int | None:
        """Where an audit of this kind waits (app.queue: fair scheduling), decided here only: a batch's audit on its
        key's batch lane, a background kind's (the service's nulls) on a batch lane too, any other audit on its
        key's interactive lane (None: the dispatcher picks it from the owner key)."""
        if batch_id is not None:
            return batch_lane(settings, owner_key_id)
        return batch_lane(settings, None) if self.background else None


class KindRegistry(Mapping[str, AuditKind]):
    """The kinds a service offers, by name (in the order given)."""

    def __init__(self, kinds: Iterable[AuditKind]) -> None:
        self._kinds: dict[str, AuditKind] = {}
        for kind in kinds:
            if kind.name in self._kinds:
                raise ValueError(f"audit kind {kind.name!r} is registered twice")
            self._kinds[kind.name] = kind

    def __getitem__(self, name: str) -> AuditKind:
        return self._kinds[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    def with_kind(self, kind: AuditKind) -> KindRegistry:
        """A registry with one more kind (a plug-in, or a test's toy kind)."""
        return KindRegistry([*self._kinds.values(), kind])

    def create_type(self) -> Any:
        """The POST /audits body: the union of every kind's create schema, discriminated by `kind`."""
        schemas = tuple(k.create for k in self._kinds.values())
        if len(schemas) == 1:
            return schemas[0]
        return Annotated[Union[schemas], Field(discriminator="kind")]  # noqa: UP007

    def routers(self) -> list[APIRouter]:
        return [router for kind in self._kinds.values() for router in kind.routers]


def get_kinds(request: Request) -> KindRegistry:
    """The registry the running app was built with (``create_app(kinds)``)."""
    return request.app.state.kinds


KindsDep = Annotated[KindRegistry, Depends(get_kinds)]
