"""Dashboard pages of the forget set (preview, filters, downloads), the registered models, and the comparison of
two models on the same subjects. The forget set comes from app/forget_set/service.py, as the API's export."""

from __future__ import annotations

from itertools import islice
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse

from app.audits import repository
from app.db.models.audit import AuditStatus
from app.deps import SessionDep, SettingsDep, require_roles
from app.forget_set import service as forget_set
from app.forget_set.policies import DEFAULT, NO_NULL, POLICIES
from app.forget_set.repository import ForgetFilters
from app.forget_set.router import EXPORTERS, MEDIA, SUFFIX
from app.privacy import access_log
from app.privacy.access_log import logged_export
from app.streaming import download
from app.subjects import service as subjects
from app.ui import verdicts
from app.ui.web import Signed, UiRoute, render

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
PREVIEW_ROWS = 50
COUNT_CAP = 10_000  # the preview counts records up to this many (a bounded loop over the export)
COMPARE_SUBJECTS = 50  # subjects compared at most, newest first


# Who may read the forget set here: the roles GET /forget-set serves. One rule for its names and values: a regulator
# (who reads the access log, GET /access-log) sees neither, in the API or here.
PREVIEWERS = EXPORTERS


class ForgetQuery:
    """The forget-set filters, as the API's GET /forget-set takes them (the policy: one that is registered now)."""

    def __init__(
        self,
        model: Annotated[str | None, Query(max_length=300)] = None,
        subject_id: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
        policy: Annotated[str, Query(max_length=100)] = DEFAULT,
        min_share: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
        min_z: Annotated[float | None, Query(allow_inf_nan=False, ge=-1e6, le=1e6)] = None,
        max_p: Annotated[float, Query(gt=0.0, le=1.0)] = 0.01,
    ) -> None:
        POLICIES.named(policy).check({"min_share": min_share, "min_z": min_z, "max_p": max_p})
        self.params = {
            "model": model or None,
            "subject_id": subject_id,
            "policy": policy,
            "min_share": min_share,
            "min_z": min_z,
            "max_p": max_p,
        }
        self.filters = ForgetFilters(model or None, subject_id, None, None, policy, min_share, min_z, max_p)


@router.get("/forget-set", response_class=HTMLResponse)
def forget_set_page(request: Request, ui: Signed, query: Annotated[ForgetQuery, Depends()]) -> HTMLResponse:
    require_roles(*PREVIEWERS)(ui.principal)  # nor a data-subject token: it reads its own audit, never the forget set
    left_out: dict[str, Any] = {}  # facts the p-value policies leave out for want of a null: said, never a silent 0
    records = forget_set.records(ui.principal, query.filters, left_out=left_out)
    rows = logged_export(records, ui.principal, "preview_forget_set")
    preview = list(islice(rows, PREVIEW_ROWS))
    count = len(preview) + sum(1 for _ in islice(rows, COUNT_CAP - len(preview)))
    rows.close()  # logs what was shown (the access log) now, not at garbage collection
    can_export = ui.principal.role in EXPORTERS
    return render(
        request,
        "forget_set.html",
        rows=preview,
        count=count,
        capped=count >= COUNT_CAP,
        pending=left_out,
        params=query.params,
        can_export=can_export,
        formats=list(SUFFIX),
        policies=list(POLICIES.values()),
        no_null=NO_NULL,
    )


@router.get("/forget-set/download", response_class=StreamingResponse)
def forget_set_download(
    ui: Signed, query: Annotated[ForgetQuery, Depends()], format: Literal["jsonl", "csv", "tofu"] = "jsonl"
) -> StreamingResponse:
    require_roles(*EXPORTERS)(ui.principal)  # the API's rule: a regulator reads, exports nothing
    body = forget_set.export(ui.principal, query.filters, format)
    return download(body, MEDIA[format], f"forget-set.{SUFFIX[format]}")


@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request, ui: Signed, settings: SettingsDep) -> HTMLResponse:
    models = [(n, s.backend, s.description) for n, s in sorted(settings.models.items())]
    return render(request, "models.html", models=models)


def _latest_by_subject(session, principal, model: str) -> dict[int, str]:  # noqa: ANN001
    """subject id -> the newest succeeded subject audit of it on ``model`` (among those the principal sees)."""
    filters = {"kind": "subject", "model": model, "status": AuditStatus.SUCCEEDED}
    rows, _ = repository.page(session, principal, filters=filters, page=1, page_size=200)
    latest: dict[int, str] = {}
    for audit in rows:  # newest first
        if audit.subject_id is not None and audit.subject_id not in latest:
            latest[audit.subject_id] = audit.id
    return latest


def _facts(session, principal, audit_id: str) -> dict[str, Any]:  # noqa: ANN001
    facts = subjects.read_facts(session, principal, audit_id, "summary")
    access_log.record(session, principal, "read_facts", subject_id=facts.subject_id, audit_id=audit_id)
    return {f.property: f for f in facts.facts}


def _verdict(fact) -> str:  # noqa: ANN001
    """The default policy's verdict on one fact (as the audit page says it): memorized / not shown / a status."""
    if fact is None:
        return "–"
    status, memorized = verdicts.fact_status(fact.calibration)
    if memorized is not None:
        return "memorized" if memorized else "not shown"
    return status


def _compare(session, principal, a: str, b: str) -> list[dict[str, Any]]:  # noqa: ANN001
    left, right = _latest_by_subject(session, principal, a), _latest_by_subject(session, principal, b)
    rows = []
    for subject_id in [s for s in left if s in right][:COMPARE_SUBJECTS]:
        fa, fb = (_facts(session, principal, side[subject_id]) for side in (left, right))
        person = subjects.repository.get_subject(session, subject_id)
        for pid in sorted(set(fa) | set(fb)):
            x, y = fa.get(pid), fb.get(pid)
            rows.append(
                {
                    "subject_id": subject_id,
                    "name": person.name if person else "",
                    "audit_a": left[subject_id],
                    "audit_b": right[subject_id],
                    "property": pid,
                    "label": (x or y).label,
                    "values": (x or y).values,
                    "a": x,
                    "b": y,
                    "a_verdict": _verdict(x),
                    "b_verdict": _verdict(y),
                    "differs": _verdict(x) in ("memorized", "not shown")
                    and _verdict(y) in ("memorized", "not shown")
                    and _verdict(x) != _verdict(y),
                }
            )
    return rows


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    ui: Signed,
    a: Annotated[str | None, Query(max_length=300)] = None,
    b: Annotated[str | None, Query(max_length=300)] = None,
) -> HTMLResponse:
    rows = _compare(session, ui.principal, a, b) if a and b else []
    session.commit()  # the access log, before the page leaves
    return render(request, "compare.html", rows=rows, a=a, b=b, models=sorted(settings.models))
