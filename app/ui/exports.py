"""Dashboard pages of the forget set (preview, filters, downloads), the registered models, and the verifications of
unlearned models against them (/ui/compare: did the forgetting work?). The forget set comes from
app/forget_set/service.py, as the API's export; a verification is an audit (app/verification)."""

from __future__ import annotations

from itertools import islice
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.audits import repository
from app.audits import service as audits
from app.audits.kinds import KindsDep
from app.db.engine import session_scope
from app.deps import SUBMITTERS, SessionDep, SettingsDep, require_roles
from app.errors import InvalidInput
from app.evidence import repository as evidence
from app.forget_set import service as forget_set
from app.forget_set.router import EXPORTERS, MEDIA, SUFFIX
from app.limits import check_rate
from app.policies import DEFAULT, NO_NULL, POLICIES, ForgetFilters
from app.privacy.access_log import logged_export
from app.settings import get_settings
from app.streaming import download
from app.ui import session as ui_session
from app.ui.session import check_csrf
from app.ui.web import Signed, UiRoute, render, url
from app.validation import Page
from app.verification.schemas import MAX_NAME_NEIGHBOURS, MAX_PEOPLE

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
PREVIEW_ROWS = 50
COUNT_CAP = 10_000  # the preview counts records up to this many (a bounded loop over the export)
VERIFICATIONS_SHOWN = 50  # verifications per page of /ui/compare, newest first
EXPORTS_OFFERED = 10  # the caller's newest forget-set exports offered by the verification form


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


def _verification_row(audit) -> dict[str, Any]:
    summary, options = audit.summary or {}, audit.options or {}
    return {
        "id": audit.id,
        "before": options.get("before"),
        "after": audit.model,
        "status": audit.status,
        "created_at": audit.created_at,
        "targets": summary.get("targets") or {},
        "over_forgetting": summary.get("over_forgetting"),
    }


def _verifications(request: Request, session, ui, settings, page: int, form: dict, errors: list, status: int = 200):
    filters = {"kind": "verification"}
    rows, total = repository.page(session, ui.principal, filters=filters, page=page, page_size=VERIFICATIONS_SHOWN)
    return render(
        request,
        "compare.html",
        status_code=status,
        rows=[_verification_row(a) for a in rows],
        total=total,
        page=page,
        pages=max(1, -(-total // VERIFICATIONS_SHOWN)),
        models=sorted(settings.models),
        can_submit=ui.principal.role in SUBMITTERS,
        max_name_neighbours=MAX_NAME_NEIGHBOURS,
        # the caller's newest deliveries, to name one by its file's SHA-256 (people.export_sha256)
        exports=evidence.exports_of(session, ui.principal.id, EXPORTS_OFFERED)
        if ui.principal.role in SUBMITTERS
        else [],
        form=form,
        errors=errors,
    )


@router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request, session: SessionDep, settings: SettingsDep, ui: Signed, page: Page = 1
) -> HTMLResponse:
    """Verifications: did the forgetting work? The verification audits this principal may see (newest first, each
    with its counts: removed, still retrievable, inconclusive, over-forgetting), and a form that starts one. Each
    opens on its audit page (app/verification/page.py)."""
    return _verifications(request, session, ui, settings, page, {}, [])


def _ids(text: str, field: str) -> list[int]:
    """Subject ids from a form's text: numbers separated by commas or spaces (at most MAX_PEOPLE)."""
    parts = text.replace(",", " ").split()[: MAX_PEOPLE + 1]
    if len(parts) > MAX_PEOPLE:
        raise InvalidInput(field, f"at most {MAX_PEOPLE} subject ids")
    if not all(p.isdigit() and 0 < len(p) <= 18 for p in parts):
        raise InvalidInput(field, "write subject ids as numbers separated by commas or spaces")
    return [int(p) for p in parts]


def _verification_body(form: dict[str, str]) -> dict[str, Any]:
    given = {f: form.get(f, "").strip() for f in ("subject_ids", "batch_id", "export_sha256")}
    if sum(map(bool, given.values())) > 1:
        raise InvalidInput("people", "fill one of: subject ids, a batch id, or an export's SHA-256")
    if given["batch_id"]:
        people: dict[str, Any] = {"batch_id": given["batch_id"]}
    elif given["export_sha256"]:
        people = {"export_sha256": given["export_sha256"].lower()}
    else:
        people = {"subject_ids": _ids(given["subject_ids"], "people.subject_ids")}
    body: dict[str, Any] = {
        "kind": "verification",
        "model": form.get("after", "").strip(),
        "before": form.get("before", "").strip(),
        "people": people,
        "locality": {"subject_ids": _ids(form.get("locality", ""), "locality.subject_ids")},
    }
    neighbours = form.get("name_neighbours", "").strip()
    if neighbours not in ("", "0"):
        if not neighbours.isdigit() or len(neighbours) > 6:
            raise InvalidInput("locality.name_neighbours", "write the number of name neighbours as a whole number")
        body["locality"]["name_neighbours"] = int(neighbours)  # its range is the API's to check
    relearn = _ids(form.get("relearn", ""), "options.relearning.subject_ids")
    if relearn:
        # the scope as chosen: an unknown one is the API's 422, naming options.relearning.scope
        scope = form.get("relearn_scope", "").strip() or "all"
        body["options"] = {"relearning": {"subject_ids": relearn, "scope": scope}}
    return body


@router.post("/compare", response_class=HTMLResponse)
async def start_verification(request: Request, ui: Signed, kinds: KindsDep) -> HTMLResponse | RedirectResponse:
    """The form's verification, submitted as POST /audits would take it (the API's validation and messages)."""
    form = {k: v for k, v in (await request.form(max_files=0, max_fields=20)).items() if isinstance(v, str)}
    check_csrf(ui, form.get(ui_session.CSRF_FIELD))
    require_roles(*SUBMITTERS)(ui.principal)
    return await run_in_threadpool(_start_verification, request, ui, kinds, form)


def _start_verification(request: Request, ui, kinds, form: dict[str, str]) -> HTMLResponse | RedirectResponse:
    settings = get_settings()
    errors: list[tuple[str, str]] = []
    try:
        body = kinds["verification"].create.model_validate(_verification_body(form))
        check_rate(settings, ui.principal.id, "submissions", settings.submit_rate_per_minute)
        with session_scope() as session:
            audit, _ = audits.create_audit(session, settings, ui.principal, body, None, kinds)
            session.commit()  # committed, and enqueued by the commit's hook, before the page says so
            audit_id = audit.id
    except ValidationError as exc:  # field names only
        errors = [(".".join(str(p) for p in e["loc"]), e["type"]) for e in exc.errors()]
    except InvalidInput as exc:
        errors = [(exc.field or "", exc.message)]
    if errors:
        with session_scope() as session:
            return _verifications(request, session, ui, settings, 1, form, errors, status=422)
    return RedirectResponse(url(f"/audits/{audit_id}"), status_code=303)
