"""Forget-set export: one record per memorized (subject, property, value) — a true value the model retrieves (ranks
first under some template) of a fact the policy selects — as JSON lines, CSV or TOFU."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from app.auth.keys import Principal
from app.db.engine import session_factory, session_scope
from app.db.models import Audit
from app.errors import InvalidInput
from app.evidence.service import ExportWitness
from app.forget_set.repository import memorized, model_audited, retrieved_values, top_counterfactuals
from app.forget_set.verdicts import Verdicts
from app.nulls.config import subject_fingerprint
from app.policies import ForgetFilters
from app.privacy.access_log import logged_export
from app.settings import Settings, get_settings
from app.streaming import END_KEY, csv_lines, jsonl_lines, with_end_marker
from app.verification.repository import verification_of
from core.catalog import load_catalog, split_template
from core.provenance import unrecorded

CSV_FIELDS = [
    "subject_id",
    "subject",
    "wikidata_id",
    "property",
    "property_label",
    "value",
    "share",
    "rank1_all",
    "rank1_any",
    "strict",
    "lenient",
    "z_star",
    "model",
    "audit_id",
    "canaries",
    "policy",
    "p_value",
    "policy_fpr",
    "null_audit_id",
    "null_status",
    "provenance",
    "verified_by",
    "verification_status",
]
TOFU_PERTURBED = 5  # perturbed answers per question, as in TOFU
FORMATS = ("jsonl", "csv", "tofu")
EXPORTED = "export_forget_set"  # access-log action


def records(
    principal: Principal, filters: ForgetFilters, *, perturbed: int = 0, left_out: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Runs in its own session: a streamed response outlives the request's session. ``perturbed`` > 0 adds the
    top-ranked counterfactuals of each fact (for the TOFU format). Once every record is out, ``left_out`` gets
    what the p-value policies left out for want of a null (Verdicts.left_out). Reads only."""
    catalog = load_catalog()
    session = session_factory()()
    try:
        verdicts = Verdicts(session, principal, filters)
        for result, audit, subject, facts, canaries in memorized(session, principal, filters):
            calibration = verdicts.judge(result, audit, canaries)
            if calibration is None:
                continue
            prop = catalog.get(result.property_id) if result.property_id in catalog else None
            retrieved = [_open_value(c.template, subject.name) for c in canaries]
            extra = {"perturbed_values": top_counterfactuals(session, result.id, perturbed)} if perturbed else {}
            values = retrieved_values(session, canaries)  # a record per value retrieved, not per true value
            for fact in (f for f in facts if f.value in values or not values):
                yield {
                    "subject_id": subject.id,
                    "subject": subject.name,
                    "wikidata_id": subject.wikidata_id,
                    "property": result.property_id,
                    "property_label": prop.label if prop else None,
                    "value": fact.value,
                    "share": result.share,
                    "rank1_all": result.strict,  # WikiMem's strict and lenient readings, not the verdict
                    "rank1_any": result.lenient,
                    "strict": result.strict,  # deprecated names of the two above (until the next release)
                    "lenient": result.lenient,
                    "z_star": result.z_star,
                    "model": audit.model,
                    "audit_id": audit.id,
                    "canaries": retrieved,
                    **calibration,
                    "provenance": _provenance(verdicts, audit, result.property_id, calibration),
                    # did the forgetting work? the newest verification of this fact (app/verification), or null
                    "verification": verification_of(session, audit.id, subject.id, result.property_id),
                    **extra,
                }
        if left_out is not None:
            left_out.update(verdicts.left_out())
    finally:
        session.close()


def _provenance(verdicts: Verdicts, audit: Audit, pid: str, calibration: dict[str, Any]) -> dict[str, Any]:
    """The audit's recorded provenance, with the null this record's verdict was judged against now."""
    base = audit.provenance or unrecorded(subject_fingerprint(audit.summary))
    null = {
        "property": pid,
        "null_audit_id": calibration["null"]["null_audit_id"],
        "config_key": verdicts.calibrator.key(audit, pid),
        "status": calibration["null"]["status"],
    }
    return {**base, "nulls": [null]}


def _open_value(template: str, name: str) -> str:
    """A retrieving canary with the subject filled in and the value slot left open."""
    head, tail = split_template(template, name, "{value}")
    return head + tail


def tofu_records(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """TOFU's QA layout (question, answer, paraphrased_answer, perturbed_answer), one record per JSON line, as
    open-unlearning's TOFU loaders and ``datasets.load_dataset("json", data_files=...)`` read it. Answers are
    the catalog's sentences: the baseline for ``answer``, the first paraphrase for ``paraphrased_answer``,
    and the baseline with each of the model's top-ranked counterfactuals for ``perturbed_answer``; ``templates``
    lists the catalog template indices those answers use."""
    catalog = load_catalog()
    for row in rows:
        if row["property"] not in catalog:
            continue
        prop = catalog.get(row["property"])
        name, value = row["subject"], row["value"]
        paraphrase = 1 if len(prop.templates) > 1 else 0
        record = {
            "question": _fill(prop.question, name),
            "answer": prop.render(0, name, value),
            "paraphrased_answer": prop.render(paraphrase, name, value),
            "perturbed_answer": [prop.render(0, name, wrong) for wrong in row["perturbed_values"]],
            # what a verification needs: whose fact, from which audit, and the catalog templates these answers
            # expose (a verification holds the property's other templates out: app/verification)
            "subject_id": row["subject_id"],
            "property": row["property"],
            "audit_id": row["audit_id"],
            "templates": sorted({0, paraphrase}),
            "verification": row["verification"],
            "policy": row["policy"],
            "p_value": row["p_value"],
            "null_audit_id": row["null"]["null_audit_id"],
            "provenance": row["provenance"],
        }
        yield record


def _fill(question: str, name: str) -> str:
    return question.replace("{subject}", name)


def _csv_row(row: dict[str, Any]) -> dict[str, Any]:
    null, fpr, verified = row["null"], row["policy_fpr"], row["verification"] or {}
    return (
        {k: row[k] for k in CSV_FIELDS[:-6]}
        | {"canaries": " | ".join(row["canaries"])}
        | {
            "policy_fpr": fpr["rate"] if fpr else None,
            "null_audit_id": null["null_audit_id"],
            "null_status": null["status"],
            "provenance": json.dumps(row["provenance"], sort_keys=True, separators=(",", ":")),
            "verified_by": verified.get("verified_by"),
            "verification_status": verified.get("status"),
        }
    )


HEX_ID = re.compile(r"^[0-9a-f]{32}$")  # an audit's or a batch's id (app.db.models: uuid4().hex)


def check_filters(settings: Settings, principal: Principal, filters: ForgetFilters) -> None:
    """422 naming the filter unless each names what exists: the filters go into the export's evidence entry, which
    is permanent and goes to regulators, so no client free text may pass (ids of the id shape, a catalog property,
    a registered model or one an audit the caller may read was run on)."""
    for field in ("audit_id", "batch_id"):
        value = getattr(filters, field)
        if value is not None and not HEX_ID.match(value):
            raise InvalidInput(field, f"{field} is an id of 32 hexadecimal digits (as the API returned it)")
    if filters.property is not None and filters.property not in {p.pid for p in load_catalog()}:
        raise InvalidInput("property", "not a property of the catalog: GET /properties lists them (e.g. P106)")
    if filters.model is not None and filters.model not in settings.models:
        with session_scope() as session:
            if not model_audited(session, principal, filters.model):
                raise InvalidInput(
                    "model", "no audit you may read was run on this model: GET /models lists the registered ones"
                )


def export(principal: Principal, filters: ForgetFilters, fmt: str) -> Iterator[str]:
    """The forget set in one of FORMATS, as a stream of text chunks; jsonl ends with END_KEY's marker line. Once
    the last chunk is out, the evidence record gets the export's entry (app.evidence.service.ExportWitness). Every
    filter is checked first (``check_filters``)."""
    settings = get_settings()
    check_filters(settings, principal, filters)
    witness = ExportWitness(settings, principal, fmt, asdict(filters))
    if fmt == "tofu":
        rows = logged_export(records(principal, filters, perturbed=TOFU_PERTURBED), principal, EXPORTED)
        return witness.seal(jsonl_lines(witness.tap(tofu_records(rows))))  # tapped as delivered: with templates
    left_out: dict[str, Any] = {}  # the end marker says how many facts wait for a null (never a silent 0)
    rows = witness.tap(logged_export(records(principal, filters, left_out=left_out), principal, EXPORTED))
    if fmt == "csv":
        chunks = csv_lines(map(_csv_row, rows), CSV_FIELDS)
    else:
        chunks = with_end_marker(jsonl_lines(rows), lambda: left_out)
    return witness.seal(chunks)


def end_marker_only(principal: Principal, filters: ForgetFilters) -> Iterator[str]:
    """The jsonl export's end marker alone (``{"_end": {"records": N, "pending": ...}}``): what a csv or tofu export
    left out, for the CLI to say. No record leaves the service, so neither the access log nor the evidence record
    gets an entry (a second, full jsonl export read for its marker was recorded as one more export: issue 43)."""
    left_out: dict[str, Any] = {}
    n = sum(1 for _ in records(principal, filters, left_out=left_out))
    yield json.dumps({END_KEY: {"records": n} | left_out}) + "\n"
