"""A null audit's rows: validate a `null` request (``prepare_null_audit``, the kind's prepare step) and create its
per-property distributions (``add_distributions``, also for the nulls the service starts itself)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Audit, NullDistribution
from app.errors import InvalidInput
from app.nulls.config import (
    config_key,
    effective_pool,
    null_config,
    people_needed,
    resolve_method,
    sentences_per_person,
)
from app.nulls.request import NullAuditCreate
from app.settings import Settings
from core.catalog import load_catalog


def prepare_null_audit(session: Session, body: NullAuditCreate, audit: Audit, settings: Settings) -> None:
    catalog = load_catalog()
    for i, pid in enumerate(body.properties):
        if pid not in catalog:
            raise InvalidInput(f"properties[{i}]", f"unknown property {pid!r}: use a property id from GET /properties")
    if len(set(body.properties)) != len(body.properties):
        raise InvalidInput("properties", "a property is listed twice; list each once")
    options = body.options.model_dump(mode="json")
    add_distributions(
        session,
        audit,
        body.properties,
        options,
        body.options.lookalikes,
        body.method,
        settings,
        facts=body.facts_per_property,
        min_people=body.min_people,
    )


def add_distributions(
    session: Session,
    audit: Audit,
    pids: Sequence[str],
    options: Mapping[str, Any],
    lookalikes: str,
    method: str,
    settings: Settings,
    *,
    facts: int | None = None,
    min_people: int | None = None,
) -> list[NullDistribution]:
    rows = []
    audit.progress_total = 0  # in sentences, as the job reports it: known (and an ETA possible) before it runs
    for pid in pids:
        pool = effective_pool(session, pid, options)
        config = null_config(pid, options, lookalikes, pool, resolve_method(method, pid, options))
        people = people_needed(config, len(pool), settings, facts, min_people)
        audit.progress_total += people * sentences_per_person(config, len(pool))
        rows.append(
            NullDistribution(
                audit_id=audit.id,
                model=audit.model,
                property_id=pid,
                key=config_key(config),
                config=config,
                method=config["method"],
                people=people,
            )
        )
    session.add_all(rows)
    session.flush()
    return rows
