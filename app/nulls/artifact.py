"""Null artifacts: a succeeded null audit as a file (``memaudit.null/1``, gzip-compressed JSON), and back.

A null is the statistics of facts about fictitious people, audited exactly like a subject on one model and
configuration. Its file holds the null's key — the model's name and fingerprint (and the SHA-256 of its weights file
where it is one file, e.g. a GGUF), the configuration of each property (``app.nulls.config.null_config``, whose hash
is the key), the verdict statistic and the fictitious-name generator — and every stored null fact, every column of
``null_facts`` but the row ids, for every stored shape. The people are fictitious (their names come from the
cohort generator and the ``seed`` in the file; their values are the catalog's pool values): no personal data.

Importing a file creates a succeeded null audit the calibration uses like one computed here. It is idempotent (a
file already imported for the model returns that null audit), validates the whole file before writing anything, and
writes in one transaction beside the nulls already stored, never over them, so a bad file changes nothing. A file
from another statistic, generator or table schema is refused with the field that differs (its null would judge
facts with numbers this version does not compute).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import re
import zlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Boolean, Float, Integer, String, Text, insert, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Audit, NullDistribution, NullFact
from app.db.models.audit import AuditStatus
from app.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from app.nulls import repository
from app.nulls.config import config_key
from app.nulls.schemas import SubjectAuditOptions
from app.settings import Settings
from core.catalog import load_catalog
from core.measures.null import MAX_TRUE_VALUES, STATISTIC
from core.names.fictitious import GENERATOR

FORMAT = "memaudit.null/1"
MEDIA_TYPE = "application/gzip"
SUFFIX = ".null.json.gz"  # a file's name ends so
SOURCES = ("shipped", "imported")  # null_distributions.source; None: computed here
MAX_DISTRIBUTIONS = 64  # a null audit's properties (app.nulls.request: at most 64)
MAX_ROWS = 400_000  # null facts per distribution: 2,000 people x (3 own shapes + every candidate's pseudo-truths)
# Inflated, at most: a file that inflates past this is refused (413; a gzip bomb). Sized to a real null: each
# shipped null (775 fictitious people, 5 properties, app/nulls/shipped/) inflates to 3.4 MB; this is about 10x that.
MAX_JSON_BYTES = 32 * 1024 * 1024
INFLATION = 16  # an import inflates to at most this many times max_null_artifact_bytes (JSON compresses ~10x)
MAX_TEXT = 1000  # characters of a Text column's value (a catalog value)
HEX64 = re.compile(r"^[0-9a-f]{64}$")
SKIPPED_COLUMNS = ("id", "distribution_id")  # row ids: the importing database gives its own
# Columns a file from an earlier version may lack: its null facts get NULL there, and what needs the column says
# `uncalibrated` (misattribution, issue 42: a null exported before it was computed)
OPTIONAL_COLUMNS = ("misattribution",)


def fact_columns() -> list[str]:
    """The columns of a null fact that a file carries: every column of ``null_facts`` but its ids, so a column
    added to the table is carried (and required) without a change here."""
    return [c.key for c in NullFact.__table__.columns if c.key not in SKIPPED_COLUMNS]


@dataclass(frozen=True)
class Artifact:
    """A parsed, validated file: the document and the SHA-256 of its canonical JSON (its identity)."""

    document: dict[str, Any]
    sha256: str

    @property
    def fingerprint(self) -> str:
        return self.document["model"]["fingerprint"]

    @property
    def model(self) -> str:
        return self.document["model"]["name"]

    def keys(self) -> dict[str, str]:
        """property id -> configuration key of each distribution."""
        return {d["property"]: d["key"] for d in self.document["distributions"]}


def canonical(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def digest(document: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(document)).hexdigest()


def dumps(document: Mapping[str, Any]) -> bytes:
    """The file's bytes: canonical JSON, gzip-compressed with no timestamp (the same null, the same bytes)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=9) as fh:
        fh.write(canonical(document))
    return out.getvalue()


# -- export ---------------------------------------------------------------------------------------------------------


def build(session: Session, audit_id: str, weights: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The artifact document of a succeeded null audit (404 when there is none; 409 before it has succeeded).
    ``weights``: the model's weights file and its SHA-256 (by which a shipped null is matched without loading the
    model), where the caller knows them."""
    audit = session.get(Audit, audit_id)
    if audit is None or audit.kind != "null":
        raise NotFound("no null audit with this id")
    if audit.status != "succeeded":
        raise Conflict(f"the null audit is {audit.status}: only a succeeded null can be exported; wait for it")
    rows = repository.of_audit(session, audit_id)
    fingerprints = {r.fingerprint for r in rows}
    if not rows or None in fingerprints or len(fingerprints) != 1:
        raise Conflict("this null has no single model fingerprint (computed before fingerprints were stored)")
    columns = fact_columns()
    distributions = []
    for row in rows:
        stmt = select(*(getattr(NullFact, c) for c in columns)).where(NullFact.distribution_id == row.id)
        facts = [list(r) for r in session.execute(stmt.order_by(NullFact.id))]
        distributions.append(
            {
                "property": row.property_id,
                "key": row.key,
                "config": row.config,
                "method": row.method,
                "people": row.people,
                "n_facts": row.n_facts,
                "summary": row.summary,
                "columns": columns,
                "rows": facts,
            }
        )
    options = dict(audit.options or {})
    return {
        "format": FORMAT,
        "model": {"name": audit.model, "fingerprint": fingerprints.pop(), "weights": dict(weights or {}) or None},
        "statistic": STATISTIC,
        "generator": GENERATOR,
        "seed": int(options.get("seed", 0)),
        "options": options,
        "cost": (audit.summary or {}).get("cost"),
        "distributions": distributions,
    }


# -- import: parse and validate everything before writing anything ----------------------------------------------------


def parse(data: bytes, max_json_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """The document of a file's bytes (gzip-compressed or plain JSON), inflated to at most ``max_json_bytes``."""
    if data[:2] == b"\x1f\x8b":
        inflater = zlib.decompressobj(wbits=31)
        try:
            text = inflater.decompress(data, max_json_bytes + 1)
        except zlib.error:
            raise InvalidInput("body", "not a readable gzip file: send a file `memaudit nulls export` wrote") from None
        if len(text) > max_json_bytes or inflater.unconsumed_tail:
            raise PayloadTooLarge(f"the file inflates past {max_json_bytes} bytes", field="body")
        if not inflater.eof:
            raise InvalidInput("body", "the gzip file is cut short: send the whole file")
    else:
        text = data
    try:
        document = json.loads(text, parse_constant=_not_a_number)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
        raise InvalidInput("body", "not JSON: send a null artifact (gzip JSON) `memaudit nulls export` wrote") from None
    if not isinstance(document, dict):
        raise InvalidInput("body", "a null artifact is a JSON object")
    return document


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: no statistic of a stored null is one


def _need(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise InvalidInput(field, message)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _cell_ok(column: Any, value: Any) -> bool:
    if value is None:
        return bool(column.nullable)
    kind = column.type
    if isinstance(kind, Boolean):
        return isinstance(value, bool)
    if isinstance(kind, Integer):
        return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
    if isinstance(kind, Float):
        return _number(value)
    if isinstance(kind, String | Text):
        limit = getattr(kind, "length", None) or MAX_TEXT
        return isinstance(value, str) and len(value) <= limit and "\x00" not in value  # PostgreSQL refuses NUL
    return False


def validate(document: dict[str, Any]) -> Artifact:
    """Check a whole document against this version (422 naming the field and the fix; values are never echoed)."""
    _need(document.get("format") == FORMAT, "format", f"not a {FORMAT} file: export it with this memaudit version")
    model = document.get("model")
    _need(isinstance(model, dict), "model", "the file names no model")
    _need(isinstance(model.get("name"), str) and 0 < len(model["name"]) <= 300, "model.name", "a model name is needed")
    fingerprint = model.get("fingerprint")
    _need(isinstance(fingerprint, str) and bool(HEX64.match(fingerprint)), "model.fingerprint", "64 hex digits needed")
    weights = model.get("weights")
    _need(weights is None or isinstance(weights, dict), "model.weights", "an object (file, sha256) or null")
    _need(
        document.get("statistic") == STATISTIC,
        "statistic",
        f"the null was computed for another verdict statistic; this version uses {STATISTIC}: compute the null again",
    )
    _need(
        document.get("generator") == GENERATOR,
        "generator",
        f"the fictitious people come from another generator; this version uses {GENERATOR}: compute the null again",
    )
    _need(isinstance(document.get("seed"), int) and document["seed"] >= 0, "seed", "the cohort's seed (>= 0)")
    _need(isinstance(document.get("options"), dict), "options", "the null audit's options (an object)")
    try:
        SubjectAuditOptions.model_validate(document["options"])
    except ValidationError:
        raise InvalidInput("options", "not the options of a subject audit this version knows") from None
    distributions = document.get("distributions")
    _need(
        isinstance(distributions, list) and 0 < len(distributions) <= MAX_DISTRIBUTIONS,
        "distributions",
        f"1 to {MAX_DISTRIBUTIONS} distributions (one per property)",
    )
    seen: set[str] = set()
    for i, d in enumerate(distributions):
        _distribution(d, f"distributions[{i}]", seen)
    return Artifact(document, digest(document))


def _distribution(d: Any, at: str, seen: set[str]) -> None:
    catalog = load_catalog()
    _need(isinstance(d, dict), at, "a distribution is an object")
    pid = d.get("property")
    _need(isinstance(pid, str) and pid in catalog, f"{at}.property", "a catalog property id (GET /properties)")
    _need(pid not in seen, f"{at}.property", "a property is listed twice; list each once")
    seen.add(pid)
    config = d.get("config")
    _need(isinstance(config, dict) and config.get("property") == pid, f"{at}.config", "the property's configuration")
    _need(config.get("statistic") == STATISTIC, f"{at}.config.statistic", f"this version uses {STATISTIC}")
    _need(config.get("generator") == GENERATOR, f"{at}.config.generator", f"this version uses {GENERATOR}")
    _need(d.get("key") == config_key(config), f"{at}.key", "the key is not the hash of the configuration")
    method = d.get("method")
    _need(method in ("full", "pseudo") and config.get("method") == method, f"{at}.method", "full or pseudo")
    people = d.get("people")
    _need(isinstance(people, int) and 0 < people <= 20_000, f"{at}.people", "the number of fictitious people")
    _need(isinstance(d.get("n_facts"), int) and d["n_facts"] >= 0, f"{at}.n_facts", "the null facts used")
    _need(d.get("summary") is None or isinstance(d["summary"], dict), f"{at}.summary", "an object or null")
    wanted = fact_columns()
    columns = d.get("columns")
    _need(isinstance(columns, list) and all(isinstance(c, str) for c in columns), f"{at}.columns", "a list of names")
    missing = [c for c in wanted if c not in columns and c not in OPTIONAL_COLUMNS]
    _need(not missing, f"{at}.columns", f"lacks {', '.join(missing)}: the file is from an older memaudit; recompute")
    extra = [c for c in columns if c not in wanted]
    _need(not extra, f"{at}.columns", "holds columns this version does not know: import it with a newer memaudit")
    _need(len(set(columns)) == len(columns), f"{at}.columns", "a column is listed twice")
    rows = d.get("rows")
    _need(isinstance(rows, list) and 0 < len(rows) <= MAX_ROWS, f"{at}.rows", f"1 to {MAX_ROWS} null facts")
    table = NullFact.__table__.columns
    types = [table[c] for c in columns]
    index = {c: i for i, c in enumerate(columns)}
    shapes: set[int] = set()
    at_person, at_share, at_m, at_assigned = (index[c] for c in ("person", "share", "n_values", "assigned"))
    # (the messages are built only for the cell that fails: a shipped file holds ~10^6 cells, read at every start)
    for j, row in enumerate(rows):  # bounded by MAX_ROWS
        _need(isinstance(row, list) and len(row) == len(columns), f"{at}.rows[{j}]", "one value per column")
        for column, value in zip(types, row, strict=True):
            if not _cell_ok(column, value):
                raise InvalidInput(f"{at}.rows[{j}].{column.key}", f"not a valid {column.key}")
        person, share, m = row[at_person], row[at_share], row[at_m]
        if not 0 <= person < people:
            raise InvalidInput(f"{at}.rows[{j}].person", "a person index below `people`")
        if not 0.0 <= share <= 1.0:
            raise InvalidInput(f"{at}.rows[{j}].share", "a share between 0 and 1")
        if not 1 <= m <= MAX_TRUE_VALUES:
            raise InvalidInput(f"{at}.rows[{j}].n_values", f"a shape of 1 to {MAX_TRUE_VALUES} true values")
        if row[at_assigned] or method == "pseudo":
            shapes.add(m)
    _need(1 in shapes, f"{at}.rows", "no null fact of the single-value shape (n_values 1) that judges a fact")


# -- import: write -----------------------------------------------------------------------------------------------------


def imported(session: Session, model: str, sha256: str) -> dict[str, str]:
    """property -> the succeeded null audit of ``model`` each of an artifact's distributions was imported into."""
    stmt = (
        select(NullDistribution.property_id, NullDistribution.audit_id)
        .join(Audit, Audit.id == NullDistribution.audit_id)
        .where(NullDistribution.artifact_sha256 == sha256, NullDistribution.model == model)
        .where(Audit.status == AuditStatus.SUCCEEDED)
        .order_by(NullDistribution.id)
    )
    return {pid: audit_id for pid, audit_id in session.execute(stmt)}


def check_fingerprint(session: Session, model: str, artifact: Artifact) -> None:
    """A file computed on other weights than the ones this model's audits ran on would judge them against the
    wrong model (422). Before any audit of the model there is nothing to compare with."""
    current = repository.latest_fingerprint(session, model)
    _need(
        current in (None, artifact.fingerprint),
        "model.fingerprint",
        "the null was computed on other weights than this server's audits of the model ran on: import it under"
        " the model it was computed on (model=...), or compute this model's null (POST a null audit)",
    )


def store(
    session: Session, artifact: Artifact, model: str, source: str, pids: Collection[str] | None = None
) -> tuple[str, bool]:
    """Create the succeeded null audit of a validated artifact's distributions for ``model`` (those of ``pids``; all
    by default) that were not imported for it yet, in the caller's transaction. Returns (null audit id, created):
    the new audit, or where every one was imported already, the audit the first of them was imported into."""
    found = imported(session, model, artifact.sha256)
    wanted = [d for d in artifact.document["distributions"] if pids is None or d["property"] in pids]
    if not wanted:
        raise ValueError("none of these properties is in the artifact")
    todo = [d for d in wanted if d["property"] not in found]
    if not todo:
        return found[wanted[0]["property"]], False
    doc, now = artifact.document, utcnow()
    summary: dict[str, Any] = {
        "source": source,
        "artifact": {"format": FORMAT, "sha256": artifact.sha256, "model": artifact.model},
        "cost": doc.get("cost"),
        "properties": {},
        "null_facts": 0,
    }
    audit = Audit(
        kind="null",
        model=model,
        options=doc["options"] | {"seed": doc["seed"]},
        status=AuditStatus.SUCCEEDED,
        owner_key_id=None,  # the service's own, like the nulls submissions create
        started_at=now,
        finished_at=now,
        progress_done=0,
        progress_total=0,
    )
    session.add(audit)
    session.flush()
    for d in todo:
        _store_distribution(session, audit.id, artifact, d, model, source)
        summary["properties"][d["property"]] = (d["summary"] or {}) | {"source": source}
        summary["null_facts"] += d["n_facts"]
    audit.summary = summary
    session.flush()
    return audit.id, True


def _store_distribution(
    session: Session, audit_id: str, artifact: Artifact, d: dict[str, Any], model: str, source: str
) -> None:
    """One distribution of the artifact and its null facts, under the null audit ``audit_id``."""
    row = NullDistribution(
        audit_id=audit_id,
        model=model,
        property_id=d["property"],
        key=d["key"],
        config=d["config"],
        method=d["method"],
        fingerprint=artifact.fingerprint,
        people=d["people"],
        n_facts=d["n_facts"],
        summary=d["summary"],  # as exported: a file exported again is the same file (its digest)
        source=source,
        artifact_sha256=artifact.sha256,
    )
    session.add(row)
    session.flush()
    facts = [dict(zip(d["columns"], r, strict=True)) | {"distribution_id": row.id} for r in d["rows"]]
    # the table's INSERT (Core), not the ORM's bulk INSERT of the mapped class: the same rows for a third of the
    # CPU (groundtruth-tiny's shipped null, 33,738 rows: 2.5 -> 0.8 s on PostgreSQL; docs/lab, per-process costs)
    session.execute(insert(NullFact.__table__), facts)


def import_bytes(session: Session, data: bytes, model: str | None, settings: Settings) -> tuple[str, bool]:
    """POST /nulls/import and `memaudit nulls import`: parse, validate, check the model, store."""
    from app.audits.service import check_model

    if len(data) > settings.max_null_artifact_bytes:
        raise PayloadTooLarge(f"the file is larger than {settings.max_null_artifact_bytes} bytes", field="body")
    artifact = validate(parse(data, min(MAX_JSON_BYTES, INFLATION * settings.max_null_artifact_bytes)))
    name = model or artifact.model
    check_model(settings, name, field="model" if model else "model.name")
    check_fingerprint(session, name, artifact)
    return store(session, artifact, name, "imported")
