"""Signing in and out of the dashboard, and submitting a subject audit from a form."""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from typing import Annotated, Any, Literal, get_args, get_origin

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.audits import service
from app.audits.kinds import KindsDep
from app.db.engine import session_scope
from app.deps import SUBMITTERS, SessionDep, SettingsDep, require_roles
from app.errors import InvalidInput, Unauthorized
from app.limits import check_rate
from app.settings import Settings, get_settings
from app.ui import session as ui_session
from app.ui.session import check_csrf
from app.ui.web import PREFIX, Signed, UiRoute, render, url
from app.validation import error_message

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
SUBMIT_KIND = "subject"
MAX_FACT_LINES = 200  # the schema's own limit (max_facts_per_subject) applies after this bound on parsing


def _safe_next(target: str | None) -> str:
    """Only a dashboard path: never an open redirect to another site."""
    if target and target.startswith("/ui/") and not target.startswith("//") and "\\" not in target:
        return target
    return url("/audits")


@router.get("/", response_class=HTMLResponse)
def home() -> RedirectResponse:
    return RedirectResponse(url("/audits"), status_code=303)


def _signin_form(
    request: Request, settings: Settings, next: str | None, error: str | None, status_code: int = 200
) -> HTMLResponse:
    """The sign-in page with a fresh sign-in token, in its form and in a SameSite=Strict cookie: a sign-in form
    posted from another site carries no such cookie, so it cannot sign this browser into someone else's key
    (login CSRF: the victim would then submit people's data into the attacker's account)."""
    token = ui_session.new_signin_token()
    response = render(
        request, "signin.html", status_code=status_code, next=_safe_next(next), error=error, signin_csrf=token
    )
    response.set_cookie(ui_session.SIGNIN_COOKIE, token, **ui_session.signin_cookie_flags(settings))
    return response


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request, settings: SettingsDep, next: str | None = None) -> HTMLResponse:
    return _signin_form(request, settings, next, None)


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request,
    settings: SettingsDep,
    token: Annotated[str, Form(max_length=300)] = "",
    next: Annotated[str, Form(max_length=2000)] = "",
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> HTMLResponse | RedirectResponse:
    if not ui_session.signin_token_matches(request.cookies.get(ui_session.SIGNIN_COOKIE), csrf):
        error = "This sign-in form has expired or was sent from another site. Paste your key or token again here."
        return _signin_form(request, settings, next, error, status_code=403)
    try:
        ui = ui_session.sign_in(settings, token)
    except Unauthorized:  # the message may describe the key's shape, never the key: still, say less here
        error = "This key or token is not valid (or was revoked). Paste an API key (mak_…) or a data-subject token."
        return _signin_form(request, settings, next, error, status_code=401)
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(ui_session.COOKIE, ui_session.encode(ui, settings), **ui_session.cookie_flags(settings))
    response.delete_cookie(ui_session.SIGNIN_COOKIE, path="/ui")
    return response


@router.post("/signout")
def signout(ui: Signed, csrf: Annotated[str | None, Form(max_length=200)] = None) -> RedirectResponse:
    check_csrf(ui, csrf)
    ui_session.sign_out(ui)  # the server-side session ends: this cookie, replayed, signs nobody in
    response = RedirectResponse(url("/signin"), status_code=303)
    response.delete_cookie(ui_session.COOKIE, path="/ui")
    return response


GENERATION = "generation_"  # the form's prefix of options.generation's fields (a form has no nested objects)


def _defaults(kinds) -> dict[str, Any]:
    """The form's options and their defaults: the mode first, then the subject audit's options, then how mode
    generation asks (``generation_<field>``)."""
    options = kinds[SUBMIT_KIND].create.model_fields["options"].default_factory()
    asked = {f"{GENERATION}{k}": v for k, v in options.generation.model_dump(mode="json").items()}
    return {"mode": options.mode, **options.model_dump(mode="json"), **asked}


def _hint(info) -> dict[str, Any]:
    """An option's hint (its schema description, the default stated) and choices, from its pydantic field."""
    default = info.get_default(call_default_factory=True)
    text = re.sub(r"\bnull\b", "blank", (info.description or "").strip())  # the API's JSON null: a blank field
    if default is None:
        text = text if "blank" in text else f"{text} (blank: the default)"
    elif isinstance(default, bool):
        text = f"{text} (default: {'on' if default else 'off'})"
    else:
        text = f"{text} (default: {default})"
    choices = list(get_args(info.annotation)) if get_origin(info.annotation) is Literal else None
    return {"hint": text, "choices": choices}


def _hints(kinds) -> dict[str, dict[str, Any]]:
    """Each option's label, hint and choices, from the pydantic schema: the form says what the API's documentation
    says (options.generation's fields as ``generation_<field>``)."""
    options = kinds[SUBMIT_KIND].create.model_fields["options"].default_factory()
    out = {}
    for name, info in type(options).model_fields.items():
        out[name] = {"label": name.replace("_", " ").capitalize(), **_hint(info)}
    for name, info in type(options.generation).model_fields.items():
        out[f"{GENERATION}{name}"] = {"label": f"Generation: {name.replace('_', ' ')}", **_hint(info)}
    return out


@router.get("/submit", response_class=HTMLResponse)
def submit_page(request: Request, ui: Signed, kinds: KindsDep, settings: SettingsDep) -> HTMLResponse:
    require_roles(*SUBMITTERS)(ui.principal)
    return render(
        request,
        "submit.html",
        defaults=_defaults(kinds),
        hints=_hints(kinds),
        form={},
        errors=[],
        models=sorted(settings.models),
        default_model=settings.default_model,
    )


def _facts(text: str) -> list[dict[str, str]]:
    """One fact a line, `P106 = physicist` (or a tab/colon instead of `=`)."""
    lines = [line for line in text.splitlines()[: MAX_FACT_LINES + 1] if line.strip()]
    if len(lines) > MAX_FACT_LINES:
        raise InvalidInput("subject.facts", f"at most {MAX_FACT_LINES} fact lines")
    facts = []
    for i, line in enumerate(lines):
        for sep in ("=", "\t", ":"):
            if sep in line:
                pid, value = line.split(sep, 1)
                facts.append({"property": pid.strip().upper(), "value": value.strip()})
                break
        else:
            raise InvalidInput(f"subject.facts[{i}]", "write each fact as `P106 = physicist` (property = value)")
    return facts


def _scalar(raw: str) -> Any:
    """A form's text as JSON would carry it: a finite number as a number, anything else as the text (the schema then
    names the field). Parsed with int()/float(), not json.loads, which recurses on `[[[[…`."""
    for parse in (int, float):
        try:
            value = parse(raw)
        except (ValueError, OverflowError):
            continue
        return value if math.isfinite(value) else raw
    return raw


def _body(form: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
    subject: dict[str, Any] = {"facts": _facts(form.get("facts", ""))}
    for field in ("name", "wikidata_id"):
        if form.get(field, "").strip():
            subject[field] = form[field].strip()
    options: dict[str, Any] = {}
    for name, default in defaults.items():
        raw = form.get(f"option_{name}")
        if isinstance(default, bool):
            options[name] = raw == "on"
        elif raw not in (None, ""):
            options[name] = _scalar(raw)  # then pydantic checks it (strictly, as the JSON API), naming the field
    asked = {k.removeprefix(GENERATION): options.pop(k) for k in list(options) if k.startswith(GENERATION)}
    if options.get("mode") == "generation":  # how it asks; in mode scoring nothing of it is sent
        options["generation"] = asked
    return {"kind": SUBMIT_KIND, "model": form.get("model", ""), "subject": subject, "options": options}


def _message(error: dict[str, Any]) -> str:
    """pydantic's message, unless it quotes the rejected value (a name or a fact): then only the error's type."""
    value, message = error.get("input"), error_message(error)
    if isinstance(value, str) and len(value) >= 3 and value in message:
        return f"invalid value ({error['type']})"
    return message


@router.post("/submit", response_class=HTMLResponse)
async def submit(request: Request, ui: Signed, kinds: KindsDep) -> HTMLResponse | RedirectResponse:
    form = {k: v for k, v in (await request.form(max_files=0, max_fields=60)).items() if isinstance(v, str)}
    return await _submit(request, ui, kinds, form)


async def _submit(request: Request, ui, kinds, form: dict[str, str]) -> HTMLResponse | RedirectResponse:
    check_csrf(ui, form.get(ui_session.CSRF_FIELD))
    require_roles(*SUBMITTERS)(ui.principal)
    return await run_in_threadpool(_create, request, ui, kinds, form)


def _create(request: Request, ui, kinds, form: dict[str, str]) -> HTMLResponse | RedirectResponse:
    settings, defaults = get_settings(), _defaults(kinds)
    errors: list[tuple[str, str]] = []
    try:
        body = kinds[SUBMIT_KIND].create.model_validate(_body(form, defaults))
        check_rate(settings, ui.principal.id, "submissions", settings.submit_rate_per_minute)
        with session_scope() as session:
            audit, _ = service.create_audit(session, settings, ui.principal, body, None, kinds)
            session.commit()  # committed, and enqueued by the commit's hook, before the page says so
            created = service.to_created(audit, settings, kinds)
    except ValidationError as exc:  # field names only: the values may be personal data
        errors = [(".".join(str(p) for p in e["loc"]), _message(e)) for e in exc.errors()]
    except InvalidInput as exc:
        errors = [(exc.field or "", exc.message)]
    if errors:
        return render(
            request,
            "submit.html",
            status_code=422,
            defaults=defaults,
            hints=_hints(kinds),
            form=form,
            errors=errors,
            models=sorted(settings.models),
            default_model=settings.default_model,
        )
    # post/redirect/get: a refresh of the next page re-posts nothing. The data subject's token is shown once, on
    # that page: a short-lived cookie names the audit just created (signed with this session's CSRF token).
    response = RedirectResponse(url(f"/submitted/{created.id}"), status_code=303)
    response.set_cookie(SHOW_TOKEN_COOKIE, _show_token_mark(ui, created.id), **_flash_flags(settings))
    return response


SHOW_TOKEN_COOKIE = "memaudit_ui_show_token"


def _show_token_mark(ui, audit_id: str) -> str:
    return hmac.new(ui.csrf.encode(), f"show-token:{audit_id}".encode(), hashlib.sha256).hexdigest()


def _flash_flags(settings: Settings) -> dict[str, object]:
    return ui_session.cookie_flags(settings) | {"max_age": 120, "path": f"{PREFIX}/submitted"}


@router.get("/submitted/{audit_id}", response_class=HTMLResponse)
def submitted_page(
    audit_id: str, request: Request, session: SessionDep, ui: Signed, kinds: KindsDep, settings: SettingsDep
) -> HTMLResponse:
    """The audit just submitted; its data subject's token the first time only (the flash cookie is spent)."""
    audit = service.get_audit(session, ui.principal, audit_id)
    mark = request.cookies.get(SHOW_TOKEN_COOKIE) or ""
    fresh = hmac.compare_digest(mark.encode(), _show_token_mark(ui, audit.id).encode())
    created = service.to_created(audit, settings, kinds)
    token = created.subject_token if fresh else None
    response = render(request, "submitted.html", audit=created, token=token, shown_before=not fresh)
    response.delete_cookie(SHOW_TOKEN_COOKIE, path=f"{PREFIX}/submitted")
    return response
