"""Forget-set export: one record per memorized (subject, property, value), as JSON lines or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from app.auth.keys import Principal
from app.db.engine import session_factory
from app.errors import Forbidden
from app.forget_set.repository import ForgetFilters, memorized, top_counterfactuals
from app.forget_set.verdicts import Verdicts
from core.catalog import load_catalog, split_template

EXPORTERS = ("admin", "auditor", "pipeline")
CSV_FIELDS = ["subject_id", "subject", "wikidata_id", "property", "property_label", "value", "share", "strict",
              "lenient", "z_star", "model", "audit_id", "canaries", "policy", "p_value", "policy_fpr", "null_audit_id",
              "null_status"]
TOFU_PERTURBED = 5  # perturbed answers per question, as in TOFU
FORMATS = ("jsonl", "csv", "tofu")


def check_can_export(principal: Principal) -> None:
    if principal.role not in EXPORTERS:
        raise Forbidden(f"exporting a forget set needs the role admin, auditor or pipeline (you are {principal.role})")


def records(principal: Principal, filters: ForgetFilters, *, perturbed: int = 0) -> Iterator[dict[str, Any]]:
    """Runs in its own session: a streamed response outlives the request's session. ``perturbed`` > 0 adds the
    top-ranked counterfactuals of each fact (for the TOFU format)."""
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
            for fact in facts:
                yield {
                    "subject_id": subject.id, "subject": subject.name, "wikidata_id": subject.wikidata_id,
                    "property": result.property_id, "property_label": prop.label if prop else None,
                    "value": fact.value, "share": result.share, "strict": result.strict,
                    "lenient": result.lenient, "z_star": result.z_star, "model": audit.model,
                    "audit_id": audit.id, "canaries": retrieved, **calibration, **extra,
                }  # fmt: skip
        verdicts.finish()
        session.commit()  # the nulls found missing are queued once this commits
    finally:
        session.close()


def _open_value(template: str, name: str) -> str:
    """A retrieving canary with the subject filled in and the value slot left open."""
    head, tail = split_template(template, name, "{value}")
    return head + tail


def as_jsonl(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False) + "\n"


def as_tofu(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    """TOFU's QA layout (question, answer, paraphrased_answer, perturbed_answer), one JSON object per line, as
    open-unlearning's TOFU loaders and ``datasets.load_dataset("json", data_files=...)`` read it. Answers are
    the catalog's sentences: the baseline for ``answer``, the first paraphrase for ``paraphrased_answer``,
    and the baseline with each of the model's top-ranked counterfactuals for ``perturbed_answer``."""
    catalog = load_catalog()
    for row in rows:
        if row["property"] not in catalog:
            continue
        prop = catalog.get(row["property"])
        name, value = row["subject"], row["value"]
        record = {
            "question": _fill(prop.question, name),
            "answer": prop.render(0, name, value),
            "paraphrased_answer": prop.render(1 if len(prop.templates) > 1 else 0, name, value),
            "perturbed_answer": [prop.render(0, name, wrong) for wrong in row["perturbed_values"]],
            "policy": row["policy"], "p_value": row["p_value"], "null_audit_id": row["null"]["null_audit_id"],
        }  # fmt: skip
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _fill(question: str, name: str) -> str:
    return question.replace("{subject}", name)


def as_csv(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for row in rows:
        null, fpr = row["null"], row["policy_fpr"]
        writer.writerow({k: row[k] for k in CSV_FIELDS[:-3]} | {"canaries": " | ".join(row["canaries"])}
                        | {"policy_fpr": fpr["rate"] if fpr else None, "null_audit_id": null["null_audit_id"],
                           "null_status": null["status"]})  # fmt: skip
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.getvalue():
        yield buf.getvalue()


def export(principal: Principal, filters: ForgetFilters, fmt: str) -> Iterator[str]:
    """The forget set in one of FORMATS, as a stream of text chunks."""
    if fmt == "tofu":
        return as_tofu(records(principal, filters, perturbed=TOFU_PERTURBED))
    rows = records(principal, filters)
    return as_csv(rows) if fmt == "csv" else as_jsonl(rows)
