"""Null audits the service starts itself: the nulls that subject audits need, created when those are submitted
(``ensure_nulls``: in the submission's transaction, never by a read; computed once, re-used by every audit with the
same model fingerprint and configuration). A null audit's rows: app/nulls/prepare.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Audit, NullDistribution
from app.db.models.audit import ACTIVE_STATUSES, AuditStatus
from app.nulls import repository
from app.nulls.config import config_key, effective_pool, null_config, people_needed, resolve_method
from app.nulls.kind import KIND
from app.nulls.prepare import add_distributions
from app.nulls.shipped import import_shipped, shipped
from app.queue import enqueue_after_commit
from app.settings import Settings

# Subject options that do not change a null (the null has its own seed; context does not enter the verdicts).
IGNORED_OPTIONS = ("seed", "context", "context_facts")


def trigger(
    session: Session, model: str, options: Mapping[str, Any], lookalikes: str, pids: Sequence[str], settings: Settings
) -> str:
    """Queue a null audit (owned by no one: the service's own) for the subject configuration ``options``; the
    job is sent when the caller commits. Returns its audit id."""
    null_options = {k: v for k, v in options.items() if k not in IGNORED_OPTIONS} | {"seed": 0}
    audit = Audit(kind="null", model=model, options=null_options | {"lookalikes": lookalikes}, owner_key_id=None)
    session.add(audit)
    session.flush()
    add_distributions(
        session, audit, sorted(set(pids), key=lambda p: int(p[1:])), null_options, lookalikes, "auto", settings
    )
    # the service's own work: the kind says its job and lane (a batch lane, behind every single audit)
    enqueue_after_commit(session, KIND.job, audit.id, lane=KIND.lane(settings))
    return audit.id


def ensure_nulls(
    session: Session,
    model: str,
    options: Mapping[str, Any],
    lookalikes: str,
    pids: Iterable[str],
    settings: Settings,
) -> str | None:
    """At a subject audit's (or a batch's) submission: queue one null audit for those of ``pids`` that no null of
    this model and configuration covers yet (queued, running, failed — a failed null is retried by POSTing a null
    audit, never automatically — or succeeded on the weights the model's latest subject audit ran on: new weights
    get a new null), after importing those a shipped null holds (app.nulls.shipped: ``source: shipped``).
    ``options`` are the subject audit's stored options. Returns the queued null audit's id, or None when every
    property is covered."""
    current = repository.latest_fingerprint(session, model, str(options.get("mode") or "scoring"))
    missing = _missing(session, model, options, lookalikes, pids, settings, current)
    shipped = import_shipped(session, model, missing, current, settings)  # a shipped file instead of computing
    left = [pid for pid in missing if pid not in shipped]
    return trigger(session, model, options, lookalikes, left, settings) if left else None


def _missing(
    session: Session,
    model: str,
    options: Mapping[str, Any],
    lookalikes: str,
    pids: Iterable[str],
    settings: Settings,
    current: str | None,
) -> dict[str, tuple[str, int]]:
    """Property -> (configuration key, people) of the nulls no null of ``model`` covers yet."""
    missing: dict[str, tuple[str, int]] = {}
    for pid in sorted(set(pids), key=lambda p: int(p[1:])):
        pool = effective_pool(session, pid, options)
        config = null_config(pid, options, lookalikes, pool, resolve_method("auto", pid, options))
        key = config_key(config)
        if not any(_covers(d, status, current) for d, status in repository.distributions(session, model, key)):
            missing[pid] = (key, people_needed(config, len(pool), settings))
    return missing


def import_shipped_nulls(session: Session, settings: Settings) -> list[str]:
    """At `memaudit migrate` and at an embedded service's start: import the shipped nulls (app.nulls.shipped) that
    this deployment's models and settings would import at their first submission, so that no user's request pays
    for it (parsing the files, hashing the weights, storing thousands of null facts: seconds, tens under load).
    Exactly what ``ensure_nulls`` would import for a subject audit at the shipped files' options; nothing is queued.
    Returns the models that got a null."""
    if not settings.shipped_nulls:
        return []
    done = []
    for artifact in shipped():
        document = artifact.document
        model = document["model"]["name"]
        if model not in settings.models:
            continue
        options = document["options"]
        pids = [d["property"] for d in document["distributions"]]
        current = repository.latest_fingerprint(session, model)
        missing = _missing(session, model, options, options.get("lookalikes", "same_origin"), pids, settings, current)
        if import_shipped(session, model, missing, current, settings):
            done.append(model)
    return done


def _covers(row: NullDistribution, status: str, fingerprint: str | None) -> bool:
    if status == AuditStatus.SUCCEEDED:
        return fingerprint is None or row.fingerprint in (None, fingerprint)
    return status in (*ACTIVE_STATUSES, AuditStatus.FAILED)
