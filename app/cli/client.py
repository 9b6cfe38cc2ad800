"""The one client every `memaudit` command that reads or submits audits goes through.

``LocalClient`` talks to this machine's database and queue in-process, as the API would (with the embedded default
the job runs on a worker thread in this process; with MEMAUDIT_REDIS_URL set an RQ worker picks it up).
``RemoteClient`` sends the same requests to a running API (``--api-url``/``--api-key``, or MEMAUDIT_API_URL /
MEMAUDIT_API_KEY). Both answer with the API's JSON documents and raise ``DomainError`` for a refused request, so a
command cannot tell them apart.

Who owns what the command line makes locally: the principal ``cli``, a real row of ``api_keys`` (role admin, name
``cli``, no secret: no token authenticates as it). Admin and regulator keys therefore see CLI-made audits, subjects and
datasets through the API like any other; an auditor key sees only its own, as always.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import httpx
from pydantic import TypeAdapter
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audits.service import cancel_audit, create_audit, get_audit, to_read, visible_audit_of_kind
from app.auth.keys import Principal
from app.batches import service as batch_service
from app.batches.report import read_report
from app.capacity import series
from app.capacity import service as capacity_service
from app.coverage import repository as dataset_repository
from app.coverage import service as dataset_service
from app.db.engine import session_scope
from app.db.models import ApiKey
from app.errors import DomainError
from app.forget_set import service as forget_set_service
from app.forget_set.repository import ForgetFilters
from app.kinds import KINDS
from app.migrate import migrate
from app.settings import get_settings
from app.subjects.schemas import SubjectAuditOptions
from app.subjects.service import read_facts

CLI_KEY_PREFIX = "cli"  # api_keys.prefix of the CLI's row; real keys have 12 hex characters, so it cannot clash
CLI_KEY_NAME = "cli"


@dataclass(frozen=True)
class DatasetUpload:
    target: str  # items | users | interactions
    path: Path
    format: str | None  # None: from the file's extension


class Client(Protocol):
    where: str  # said in messages: "the local database …" or "the API at …"

    def submit(self, payload: dict[str, Any]) -> str: ...
    def audit(self, audit_id: str) -> dict[str, Any]: ...
    def cancel(self, audit_id: str) -> dict[str, Any]: ...
    def facts(self, audit_id: str) -> dict[str, Any]: ...
    def forget_set(self, params: dict[str, Any]) -> Iterator[str]: ...
    def capacity(self, audit_id: str, part: str) -> dict[str, Any]: ...
    def add_dataset(self, name: str, files: list[DatasetUpload], mapping: dict[str, Any]) -> dict[str, Any]: ...
    def datasets(self) -> list[dict[str, Any]]: ...
    def delete_dataset(self, dataset_id: str) -> dict[str, Any]: ...
    def coverage_comparison(self, dataset_id: str, target: str | None) -> dict[str, Any]: ...
    def submit_batch(self, path: Path, models: list[str], options: dict[str, Any], partial: bool) -> dict[str, Any]: ...

    def batch(self, batch_id: str, part: str = "") -> dict[str, Any]: ...


def ensure_cli_key(session: Session) -> int:
    """The id of the CLI's api_keys row, created on first use. Its secret hash is empty: no token matches it."""
    found = session.scalar(select(ApiKey.id).where(ApiKey.prefix == CLI_KEY_PREFIX))
    if found is not None:
        return found
    try:
        with session.begin_nested():
            key = ApiKey(prefix=CLI_KEY_PREFIX, secret_hash="", role="admin", name=CLI_KEY_NAME)
            session.add(key)
        return key.id
    except IntegrityError:  # another `memaudit` process created it at the same moment
        return session.scalar(select(ApiKey.id).where(ApiKey.prefix == CLI_KEY_PREFIX))


def cli_principal(session: Session) -> Principal:
    return Principal(id="cli", role="admin", key_id=ensure_cli_key(session))


def open_local_database() -> Principal:
    """Create the embedded SQLite schema on first use, and return the CLI's principal."""
    if get_settings().database_url.startswith("sqlite"):
        migrate()
    with session_scope() as s:
        return cli_principal(s)


class LocalClient:
    """This machine's database and queue, called in-process with the CLI's principal."""

    def __init__(self) -> None:
        self.principal = open_local_database()
        self.where = f"the local database {make_url(get_settings().database_url).render_as_string(hide_password=True)}"

    def submit(self, payload: dict[str, Any]) -> str:
        body = TypeAdapter(KINDS.create_type()).validate_python(payload)
        with session_scope() as s:
            audit, _ = create_audit(s, get_settings(), self.principal, body, None, KINDS)
            return audit.id

    def audit(self, audit_id: str) -> dict[str, Any]:
        with session_scope() as s:
            return to_read(get_audit(s, self.principal, audit_id), KINDS).model_dump(mode="json")

    def cancel(self, audit_id: str) -> dict[str, Any]:
        with session_scope() as s:
            return to_read(cancel_audit(s, self.principal, audit_id), KINDS).model_dump(mode="json")

    def facts(self, audit_id: str) -> dict[str, Any]:
        with session_scope() as s:
            return read_facts(s, self.principal, audit_id, "summary").model_dump(mode="json")

    def forget_set(self, params: dict[str, Any]) -> Iterator[str]:
        fmt = params.get("format", "jsonl")
        fields = {k: v for k, v in params.items() if k != "format" and v is not None}
        return forget_set_service.export(self.principal, ForgetFilters(**fields), fmt)

    def capacity(self, audit_id: str, part: str) -> dict[str, Any]:
        with session_scope() as s:
            audit = visible_audit_of_kind(s, self.principal, audit_id, "capacity")
            doc = series.series(s, audit) if part == "series" else capacity_service.grid_read(s, audit)
            return doc.model_dump(mode="json")

    def add_dataset(self, name: str, files: list[DatasetUpload], mapping: dict[str, Any]) -> dict[str, Any]:
        with ExitStack() as stack:
            sources = []
            for f in files:
                stream = stack.enter_context(f.path.open("rb"))  # read line by line, never whole
                size = f.path.stat().st_size
                sources.append(
                    dataset_service.SourceFile(f.target, f.path.name, stream, size, f.format, mapping.get(f.target))
                )
            with session_scope() as s:
                dataset = dataset_service.ingest(s, get_settings(), self.principal, name, sources)
                return dataset_service.read(s, dataset).model_dump(mode="json")

    def datasets(self) -> list[dict[str, Any]]:
        with session_scope() as s:
            rows, _ = dataset_repository.page(s, self.principal, page=1, page_size=get_settings().max_page_size)
            files = dataset_repository.files_of(s, [d.id for d in rows])
            return [dataset_service.to_read(d, files[d.id]).model_dump(mode="json") for d in rows]

    def delete_dataset(self, dataset_id: str) -> dict[str, Any]:
        with session_scope() as s:
            return {"id": dataset_id, "records_deleted": dataset_service.delete(s, self.principal, dataset_id)}

    def coverage_comparison(self, dataset_id: str, target: str | None) -> dict[str, Any]:
        with session_scope() as s:
            return dataset_service.compare(s, self.principal, dataset_id, target).model_dump(mode="json")

    def submit_batch(self, path: Path, models: list[str], options: dict[str, Any], partial: bool) -> dict[str, Any]:
        spec = batch_service.file_spec(path.read_bytes(), path.name, models, SubjectAuditOptions(**options), partial)
        with session_scope() as s:
            batch, roster = batch_service.create_batch(s, get_settings(), self.principal, spec, None)
            s.commit()
            return {
                **batch_service.batch_read(s, batch).model_dump(mode="json"),
                "errors": batch_service.errors_read(roster.errors if roster else []),
            }

    def batch(self, batch_id: str, part: str = "") -> dict[str, Any]:
        with session_scope() as s:
            batch = batch_service.get_batch(s, self.principal, batch_id)
            doc = read_report(s, batch) if part == "report" else batch_service.batch_read(s, batch)
            return doc.model_dump(mode="json")


class RemoteClient:
    """A running memaudit API, with an API key."""

    def __init__(self, url: str, key: str | None) -> None:
        if not key:
            raise DomainError("a remote API needs a key: --api-key KEY or MEMAUDIT_API_KEY", field="--api-key")
        self.where = f"the API at {url}"
        self.http = httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise DomainError(f"cannot reach {self.where} ({type(exc).__name__})") from exc
        raise_for(response)
        return response.json()

    def submit(self, payload: dict[str, Any]) -> str:
        return self._json("POST", "/audits", json=payload)["id"]

    def audit(self, audit_id: str) -> dict[str, Any]:
        return self._json("GET", f"/audits/{audit_id}")

    def cancel(self, audit_id: str) -> dict[str, Any]:
        return self._json("DELETE", f"/audits/{audit_id}")

    def facts(self, audit_id: str) -> dict[str, Any]:
        return self._json("GET", f"/audits/{audit_id}/facts")

    def forget_set(self, params: dict[str, Any]) -> Iterator[str]:
        query = {k: v for k, v in params.items() if v is not None}
        with self.http.stream("GET", "/forget-set", params=query) as response:
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
                timeout=600,
            )  # 100,000 rows: ~1 min

    def batch(self, batch_id: str, part: str = "") -> dict[str, Any]:
        return self._json("GET", f"/batches/{batch_id}" + (f"/{part}" if part else ""))


class ApiRefused(DomainError):
    """An API refusal over HTTP: the local client's DomainError, with the status and a rejected roster's rows."""

    def __init__(self, message: str, field: str | None, status_code: int, rows: list[dict[str, Any]]) -> None:
        super().__init__(message, field=field)
        self.status_code, self.rows = status_code, rows


def raise_for(response: Any) -> None:
    """An API refusal as the DomainError the local client would have raised (same field, same message)."""
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
    settings = get_settings()
    url = getattr(args, "api_url", None) or settings.api_url
    if url:
        return RemoteClient(url, getattr(args, "api_key", None) or settings.api_key)
    return LocalClient()
