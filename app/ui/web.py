"""What every dashboard page shares: the templates (autoescaped), the security headers, the signed-in principal,
and the mapping of domain errors to HTML pages (the JSON API maps the same errors to its error shape)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

from app.deps import BATCH_READERS, REQUEST_READERS, SUBMITTERS
from app.errors import DomainError, TooManyRequests
from app.limits import check_rate
from app.settings import get_settings
from app.ui import charts
from app.ui import session as ui_session
from app.ui.session import BadCsrf, NotSignedIn, UiSession
from app.ui.verdicts import MAX_P, duration
from core import defaults

HERE = Path(__file__).resolve().parent
PREFIX = "/ui"
# No inline script or style anywhere: scripts and styles come from /ui/static only; charts are inline SVG drawn on the
# server (app/ui/charts.py), styled by class from ui.css.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",  # pages hold personal data: never kept by a browser or proxy cache
}

# Templates by name under templates/, or by absolute path: a kind declares its page's template (AuditKind.page),
# and a plug-in kind keeps it beside its code. Template names come from code only, never from a request.
env = Environment(
    loader=ChoiceLoader([FileSystemLoader(HERE / "templates"), FileSystemLoader("/")]),
    autoescape=True,
    undefined=StrictUndefined,
)
env.filters["pct"] = lambda x: "–" if x is None else f"{100 * x:.0f}%"
env.filters["num"] = lambda x, d=2: "–" if x is None else f"{x:.{d}f}"
env.filters["sci"] = lambda x: "–" if x is None else f"{x:.2g}"
templates = Jinja2Templates(env=env)


def url(path: str, **params: object) -> str:
    """A dashboard URL with the non-empty query parameters."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{PREFIX}{path}" + (f"?{query}" if query else "")


env.globals["url"] = url
env.globals["submitters"] = SUBMITTERS  # the roles' lists, from app/deps.py (never spelled in a template)
env.globals["batch_readers"] = BATCH_READERS
env.globals["request_readers"] = REQUEST_READERS
env.globals["max_p"] = MAX_P
env.globals["chance_z_phrase"] = defaults.CHANCE_Z_PHRASE
env.globals["duration"] = duration
env.globals["bars"] = charts.bars
env.globals["lines"] = charts.lines
env.globals["Series"] = charts.Series
env.globals["series_of"] = lambda named: [charts.Series(str(k), list(v)) for k, v in named.items()]


def current_session(request: Request) -> UiSession:
    settings = get_settings()
    found = ui_session.decode(request.cookies.get(ui_session.COOKIE), settings)
    if not ui_session.still_valid(found):
        raise NotSignedIn
    request.state.ui = found
    # the request limit of the bearer-key API (app.middleware): a cookie is no way around it (the submit form
    # counts its submissions itself, app.ui.account)
    check_rate(settings, found.principal.id, "requests", settings.rate_limit_per_minute)
    return found


Signed = Annotated[UiSession, Depends(current_session)]


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    ui = getattr(request.state, "ui", None)
    context = {"request": request, "ui": ui, "principal": ui.principal if ui else None, **context}
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def error_page(request: Request, status_code: int, message: str) -> HTMLResponse:
    return render(request, "error.html", status_code=status_code, status=status_code, message=message)


def _drop_blank_params(request: Request) -> None:
    """A GET form sends its empty fields as `name=`: an empty filter is no filter (so pages work without JS)."""
    raw = request.scope.get("query_string", b"")
    if b"=&" in raw + b"&":
        kept = [(k, v) for k, v in parse_qsl(raw.decode("latin-1"), keep_blank_values=True) if v != ""]
        request.scope["query_string"] = urlencode(kept).encode("latin-1")


class UiRoute(APIRoute):
    """Dashboard routes answer HTML: not signed in -> the sign-in page; a domain error -> an HTML page with its
    status and message (404 for another principal's audit, as the API); and every answer gets the security
    headers."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model"] = None  # pages are HTML: no JSON schema of their answers
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            _drop_blank_params(request)
            try:
                response = await handler(request)
            except NotSignedIn:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                nxt = target if request.method == "GET" else None
                response = RedirectResponse(url("/signin", next=nxt), status_code=303)
                response.delete_cookie(ui_session.COOKIE, path=PREFIX)
            except BadCsrf:
                response = error_page(
                    request,
                    403,
                    "This form is out of date or was not sent by this dashboard. "
                    "Reload the page and try again; nothing was changed.",
                )
            except DomainError as exc:
                response = error_page(request, exc.status_code, exc.message)
                if isinstance(exc, TooManyRequests):
                    response.headers["Retry-After"] = str(exc.retry_after)
            except RequestValidationError as exc:  # field names only: the values may be personal data
                fields = sorted({".".join(str(p) for p in e["loc"][1:]) for e in exc.errors()})
                response = error_page(request, 422, f"Check these fields: {', '.join(fields)}.")
            response.headers.update(SECURITY_HEADERS)
            return response

        return route
