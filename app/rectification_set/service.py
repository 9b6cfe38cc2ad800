"""Rectification-set export (GDPR Art. 16): one record per fact for which the model prefers a specific false value
beyond chance — the value it asserts, the true values, the p-value against the null of fictitious people, the mode
that measured it, and the prompts that elicited it — for pipelines that correct a model (fine-tuned corrections,
guardrails, retrieval overrides). The forget set's machinery: its scope and filters, roles, access log, streaming
writer (CSV formula neutralising, the jsonl end marker) and evidence entry (kind ``rectification_set_export``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.engine import session_factory
from app.db.models import Audit, FactResult, Subject
from app.evidence.schemas import EntryKind
from app.evidence.service import ExportWitness
from app.forget_set.service import check_filters
from app.nulls.calibrate import Calibrator
from app.nulls.config import subject_fingerprint
from app.nulls.misattribution import MisattributionJudge
from app.nulls.schemas import MisattributionRead
from app.policies import ForgetFilters
from app.privacy.access_log import logged_export
from app.rectification_set.repository import misattributions
from app.settings import get_settings
from app.streaming import csv_lines, jsonl_lines, with_end_marker
from core.catalog import load_catalog, split_template
from core.measures.null import benjamini_hochberg
from core.provenance import unrecorded

POLICIES = ("pvalue", "bh")  # p <= max_p per fact, or Benjamini-Hochberg at q across the export
EXPORTED = "export_rectification_set"  # access-log action
CSV_FIELDS = [
    "subject_id",
    "subject",
    "wikidata_id",
    "property",
    "property_label",
    "severity",
    "special_category",
    "asserted_value",
    "true_values",
    "statistic",
    "p_value",
    "mode",
    "example",
    "prompts",
    "model",
    "audit_id",
    "policy",
    "null_audit_id",
    "provenance",
]


def _judged(session: Session, principal: Principal, filters: ForgetFilters, pending: dict[str, int]) -> Iterator:
    """(result, audit, subject, facts, misattribution, null audit id) of every fact in scope with a p-value; the
    others counted in ``pending`` by why (the null pending or missing, or the statistic uncalibrated)."""
    calibrator = Calibrator(session, max_p=filters.max_p)
    judge = MisattributionJudge(calibrator)
    for result, audit, subject, facts in misattributions(session, principal, filters):
        found = calibrator.resolve(audit, result.property_id)
        verdict = judge.judge(audit, result)
        if verdict is None or verdict.p_value is None:
            why = "uncalibrated" if verdict is not None else found.status
            pending[why] = pending.get(why, 0) + 1
            continue
        yield result, audit, subject, facts, verdict, found.row.audit_id if found.row else None


def records(principal: Principal, filters: ForgetFilters, left_out: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Runs in its own session (a streamed response outlives the request's). Reads only."""
    session = session_factory()()
    try:
        threshold = filters.max_p
        if filters.policy == "bh":
            unjudged: dict[str, int] = {}  # m counts them too, at p = 1 (as the forget set's bh does)
            ps = [v.p_value for *_, v, _ in _judged(session, principal, filters, unjudged)]
            ps += [1.0] * sum(unjudged.values())
            threshold = benjamini_hochberg(ps, filters.q) if ps else 0.0
        label = f"pvalue<={filters.max_p:g}"
        if filters.policy == "bh":
            label = f"bh(q={filters.q:g}): p<={threshold:.4g}"
        pending: dict[str, int] = {}
        for result, audit, subject, facts, verdict, null_id in _judged(session, principal, filters, pending):
            if verdict.p_value <= threshold:
                yield _record(result, audit, subject, [f.value for f in facts], verdict) | {
                    "policy": label,
                    "null": {"null_audit_id": null_id, "status": "ready"},
                    "provenance": (audit.provenance or unrecorded(subject_fingerprint(audit.summary)))
                    | {"nulls": [{"property": result.property_id, "null_audit_id": null_id}]},
                }
        if pending:
            left_out.update({"pending": sum(pending.values()), "pending_by_status": dict(sorted(pending.items()))})
    finally:
        session.close()


def _record(
    result: FactResult, audit: Audit, subject: Subject, truths: list[str], verdict: MisattributionRead
) -> dict[str, Any]:
    catalog = load_catalog()
    prop = catalog.get(result.property_id) if result.property_id in catalog else None
    mode, prompts, example = _elicited(result, subject.name, verdict.value, prop.baseline if prop else None)
    return {
        "subject_id": subject.id,
        "subject": subject.name,
        "wikidata_id": subject.wikidata_id,
        "property": result.property_id,
        "property_label": prop.label if prop else None,
        "severity": "special" if prop and prop.special_category else "ordinary",  # as GET /audits/{id}/facts says
        "special_category": prop.special_category if prop else None,
        "asserted_value": verdict.value,
        "true_values": truths,
        "statistic": verdict.statistic,
        "p_value": verdict.p_value,
        "mode": mode,
        "example": example,  # the baseline sentence with the false value: what the model asserts
        "prompts": prompts,  # what elicited it: the templates (subject filled in, value open) or the prompts asked
        "model": audit.model,
        "audit_id": audit.id,
    }


def _elicited(result: FactResult, name: str, value: str | None, baseline: str | None) -> tuple[str, list[str], Any]:
    """(mode, prompts, example sentence): scoring's templates with the subject filled in and the value open, or the
    prompts a generation audit sent; the baseline sentence with the asserted value."""
    if result.generation is not None:
        prompts = [p["prompt"] for p in result.generation.get("prompts") or []]
        example = "".join(split_template(baseline, name, value)) if baseline and value else None
        return "generation", prompts, example
    canaries = [c for c in result.canaries if c.kind != "context"]
    prompts = ["".join(split_template(c.template, name, "{value}")) for c in canaries]
    example = "".join(split_template(canaries[0].template, name, value)) if canaries and value else None
    return "scoring", prompts, example


def _csv_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in CSV_FIELDS if k in row} | {
        "true_values": " | ".join(row["true_values"]),
        "prompts": " | ".join(row["prompts"]),
        "null_audit_id": row["null"]["null_audit_id"],
        "provenance": json.dumps(row["provenance"], sort_keys=True, separators=(",", ":")),
    }


def export(principal: Principal, filters: ForgetFilters, fmt: str) -> Iterator[str]:
    """The rectification set as jsonl (ending with the ``{"_end": {...}}`` marker) or csv, as text chunks; once the
    last chunk is out the evidence record gets the export's entry. Every filter is checked first."""
    settings = get_settings()
    check_filters(settings, principal, filters)
    witness = ExportWitness(settings, principal, fmt, asdict(filters), EntryKind.RECTIFICATION_SET_EXPORT)
    left_out: dict[str, Any] = {}
    rows = witness.tap(logged_export(records(principal, filters, left_out), principal, EXPORTED))
    if fmt == "csv":
        return witness.seal(csv_lines(map(_csv_row, rows), CSV_FIELDS))
    return witness.seal(with_end_marker(jsonl_lines(rows), lambda: left_out))
