"""The one client every `memaudit` command that reads or submits audits goes through: the HTTP API.

By default the API runs in this process: ``Client.in_process()`` sends the requests to ``create_app()`` over an
in-process transport (Starlette's ``TestClient``, an ``httpx.Client`` whose transport calls the ASGI app), so a local
command passes through the same authentication, roles, access log, errors and limits as any API client. With the
embedded default the audits it submits run on this process's worker thread (app/queue.py ``EmbeddedDispatcher``,
started by the first job sent), and so do the audits earlier commands left queued (``resume_pending``, what the
app's startup does under `memaudit serve`; a ``TestClient`` outside ``with`` skips the lifespan); the runner hands
back what it holds when the process exits. With MEMAUDIT_REDIS_URL set an RQ worker picks them up.
``Client.remote()`` sends the same requests to a running API (``--api-url``/``--api-key``, or MEMAUDIT_API_URL /
MEMAUDIT_API_KEY). A refused request raises ``ApiRefused`` (a ``DomainError``) with the API's field and message.

Who owns what the command line makes locally: the API key ``cli``, a real row of ``api_keys`` (role admin, name
``cli``); its token is valid in this process only (app/auth/keys.py ``in_process_token``). Admin and regulator keys
see CLI-made audits, subjects and datasets through the API like any other; an auditor key sees only its own.

Imports stay light here (the web app, the database and httpx are imported when a client is made).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from app.errors import DomainError

if TYPE_CHECKING:
    import httpx

    from app.auth.keys import Principal

LOCAL_BASE_URL = "http://memaudit.local"  # never resolved: the in-process transport calls the app directly


@dataclass(frozen=True)
class DatasetUpload:
    target: str  # items | users | interactions
    path: Path
    format: str | None  # None: from the file's extension


def open_local_database() -> Principal:
    """Create the embedded SQLite schema on first use, and return the CLI's principal."""
    from app.auth.keys import cli_principal
    from app.db.engine import session_scope
    from app.migrate import migrate
    from app.settings import get_settings

    if get_settings().database_url.startswith("sqlite"):
        migrate()
    with session_scope() as s:
        return cli_principal(s)


class Client:
    """The API over HTTP: in this process (``in_process``) or at a URL (``remote``), with one API key."""

    def __init__(self, http: httpx.Client, where: str, local: bool) -> None:
        self.http, self.where, self.local = http, where, local  # where: said in messages

    @classmethod
    def in_process(cls) -> Client:
        """The API of this machine's database and queue, in this process, as the CLI's key."""
        from sqlalchemy.engine import make_url
        from starlette.testclient import TestClient

        from app.auth.keys import in_process_token
        from app.main import create_app
        from app.settings import get_settings

        open_local_database()
        http = TestClient(
            create_app(),
            base_url=LOCAL_BASE_URL,
            raise_server_exceptions=False,  # an error is the API's answer (a 500 in the error shape), as over HTTP
            headers={"Authorization": f"Bearer {in_process_token()}"},
        )
        url = make_url(get_settings().database_url).render_as_string(hide_password=True)
        return cls(http, f"the local database {url}", local=True)

    @classmethod
    def remote(cls, url: str, key: str | None) -> Client:
        """A running memaudit API, with an API key."""
        import httpx

        if not key:
            raise DomainError("a remote API needs a key: --api-key KEY or MEMAUDIT_API_KEY", field="--api-key")
        http = httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {key}"}, timeout=60)
        return cls(http, f"the API at {url}", local=False)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise DomainError(f"cannot reach {self.where} ({type(exc).__name__})") from exc
        raise_for(response)
        return response.json()

    def run_queued_work(self) -> None:
        """Local, embedded: run in this process what earlier commands left queued (a null they handed back as they
        exited), as `memaudit serve` does at startup (a TestClient outside `with` skips the app's lifespan). Only
        commands that wait for results ask for it: a quick one would start a job only to hand it back."""
        from app.settings import get_settings

        if self.local and not get_settings().redis_url:
            from app.embedded import resume_pending

            resume_pending(self.http.app.state.kinds)

    def properties(self) -> list[dict[str, Any]]:
        return self._json("GET", "/properties")

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any JSON endpoint (the requests commands: app/cli/requests.py): the API's answer, or ApiRefused."""
        return self._json(method, path, **kwargs)

    def submit(self, payload: dict[str, Any]) -> str:
        return self._json("POST", "/audits", json=payload)["id"]

    def audit(self, audit_id: str) -> dict[str, Any]:
        return self._json("GET", f"/audits/{audit_id}")

    def cancel(self, audit_id: str) -> dict[str, Any]:
        return self._json("DELETE", f"/audits/{audit_id}")

    def facts(self, audit_id: str) -> dict[str, Any]:
        return self._json("GET", f"/audits/{audit_id}/facts")

    def verification(self, audit_id: str) -> dict[str, Any]:
        """A verification's results, every fact (pages of the API's largest size, put together)."""
        page, out = 1, None
        while True:
            got = self._json("GET", f"/audits/{audit_id}/verification", params={"page": page, "page_size": 200})
            out = got if out is None else {**out, "facts": out["facts"] + got["facts"]}
            if len(out["facts"]) >= got["total"] or not got["facts"]:
                return out
            page += 1

    def forget_set(self, params: dict[str, Any], path: str = "/forget-set") -> Iterator[str]:
        """An export's text chunks: the forget set, or the rectification set (``path="/rectification-set"``)."""
        query = {k: v for k, v in params.items() if v is not None}
        with self.http.stream("GET", path, params=query) as response:
            if response.status_code >= 400:
                response.read()
                raise_for(response)
            yield from response.iter_text()

    def capacity(self, audit_id: str, part: str) -> dict[str, Any]:
        return self._json("GET", f"/audits/{audit_id}/capacity" + ("/series" if part == "series" else ""))

    def add_dataset(self, name: str, files: list[DatasetUpload], mapping: dict[str, Any]) -> dict[str, Any]:
        data = {"name": name, **({"mapping": json.dumps(mapping)} if mapping else {})}
        data.update({f"{f.target}_format": f.format for f in files if f.format})
        with ExitStack() as stack:
            uploads: dict[str, tuple[str, BinaryIO]] = {
                f.target: (f.path.name, stack.enter_context(f.path.open("rb"))) for f in files
            }
            return self._json("POST", "/datasets", data=data, files=uploads)

    def datasets(self) -> list[dict[str, Any]]:
        return self._json("GET", "/datasets", params={"page_size": 200})["items"]

    def delete_dataset(self, dataset_id: str) -> dict[str, Any]:
        return self._json("DELETE", f"/datasets/{dataset_id}")

    def coverage_comparison(self, dataset_id: str, target: str | None) -> dict[str, Any]:
        return self._json("GET", f"/datasets/{dataset_id}/coverage", params={"target": target} if target else {})

    def submit_batch(self, path: Path, models: list[str], options: dict[str, Any], partial: bool) -> dict[str, Any]:
        with path.open("rb") as roster:
            data = {"model": models, "options": json.dumps(options)}
            return self._json(
                "POST",
                "/batches",
                params={"partial": str(partial).lower()},
                data=data,
                files={"roster": (path.name, roster)},
                **({} if self.local else {"timeout": 600}),  # 100,000 rows: ~1 min (in process: no timeout)
            )

    def batch(self, batch_id: str, part: str = "") -> dict[str, Any]:
        return self._json("GET", f"/batches/{batch_id}" + (f"/{part}" if part else ""))

    def null_artifact(self, audit_id: str) -> bytes:
        """A succeeded null audit as a file (``memaudit.null/1``, gzip JSON)."""
        import httpx

        try:
            response = self.http.get(f"/nulls/{audit_id}/artifact")
        except httpx.HTTPError as exc:
            raise DomainError(f"cannot reach {self.where} ({type(exc).__name__})") from exc
        raise_for(response)
        return response.content

    def import_null(self, data: bytes, model: str | None) -> dict[str, Any]:
        params = {"model": model} if model else {}
        headers = {"Content-Type": "application/gzip"}
        return self._json("POST", "/nulls/import", content=data, params=params, headers=headers)


class ApiRefused(DomainError):
    """An API refusal: the field and message of the API's error, its status and a rejected roster's rows."""

    def __init__(self, message: str, field: str | None, status_code: int, rows: list[dict[str, Any]]) -> None:
        super().__init__(message, field=field)
        self.status_code, self.rows = status_code, rows


def raise_for(response: Any) -> None:
    """An API refusal as a DomainError with the API's field and message."""
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    field, rows = None, []
    if isinstance(detail, list) and detail and all(isinstance(d, dict) for d in detail):
        field = detail[0].get("field")
        rows = [d for d in detail if d.get("row")]  # a rejected roster's rows: the caller prints one a line
        message = "; ".join(str(d.get("message")) for d in detail if not d.get("row")) or "the roster was rejected"
    elif isinstance(detail, str):
        message = detail
    else:
        message = f"the API answered {response.status_code}"
    raise ApiRefused(message, field, response.status_code, rows)


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-url",
        default=None,
        help="talk to a running memaudit API instead of this machine's database "
        "(default: MEMAUDIT_API_URL, else local)",
    )
    parser.add_argument("--api-key", default=None, help="the API key for --api-url (default: MEMAUDIT_API_KEY)")


def make_client(args: argparse.Namespace) -> Client:
    from app.settings import get_settings

    settings = get_settings()
    url = getattr(args, "api_url", None) or settings.api_url
    if url:
        return Client.remote(url, getattr(args, "api_key", None) or settings.api_key)
    return Client.in_process()
