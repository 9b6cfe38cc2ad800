"""Dataset use cases: ingest an upload (streamed, validated), read, delete; prepare a coverage audit;
compare models on one dataset. Services never commit; the caller does."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, BinaryIO

from sqlalchemy.orm import Session

from app.audits.repository import visible as audits_visible
from app.audits.service import visible_audit_of_kind
from app.auth.keys import Principal
from app.coverage import repository
from app.coverage.formats import DELIMITERS, FORMATS, TARGETS, DatasetError, FileFormat, Target, mapping_from_dict
from app.coverage.parsing import ParseReport, Popularity, Record, format_line, parse_file
from app.coverage.schemas import (
    CoverageAuditCreate,
    CoverageComparison,
    CoverageRow,
    DatasetFileRead,
    DatasetRead,
    Problem,
)
from app.db.engine import session_factory
from app.db.models import ApiKey, Audit, CoverageAudit, Dataset, DatasetFile
from app.db.models.auth import Role
from app.errors import InvalidInput, NotFound, PayloadTooLarge
from app.settings import Settings
from core.measures.coverage import few_shot_prefix, query_of

EXTENSIONS: dict[str, FileFormat] = {".dat": "movielens", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv"}
SHOWN_LINE_NUMBERS = 10


@dataclass
class SourceFile:
    """One uploaded file: a binary stream read line by line, never whole."""

    target: Target
    filename: str
    stream: BinaryIO
    size: int
    format: FileFormat | None = None  # None: from the file name's extension
    mapping: dict | None = None  # the JSON form of app.coverage.formats.ColumnMapping


def file_format(source: SourceFile) -> FileFormat:
    if source.format is not None:
        if source.format not in FORMATS:
            raise InvalidInput(f"{source.target}_format", f"format must be one of {', '.join(FORMATS)}")
        return source.format
    found = EXTENSIONS.get(PurePath(source.filename).suffix.lower())
    if found is None:
        raise InvalidInput(
            f"{source.target}_format",
            f"cannot tell the format of {source.target} file from its name; name it .dat, .csv or .tsv or "
            f"declare {source.target}_format (movielens, csv or tsv)",
        )
    return found


def ingest(session: Session, settings: Settings, principal: Principal, name: str, sources: list[SourceFile]) -> Dataset:
    """Parse and store every file of an upload. Malformed lines are skipped and reported by line number;
    an interaction naming an item or user absent from the uploaded items/users file rejects the upload."""
    name = name.strip()
    if not 1 <= len(name) <= 200:
        raise InvalidInput("name", "name must be 1 to 200 characters")
    if not sources:
        raise InvalidInput("files", "upload at least one file: items, users or interactions")
    total = sum(s.size for s in sources)
    if total > settings.max_dataset_upload_bytes:
        raise PayloadTooLarge(f"the upload is {total} bytes; the limit is {settings.max_dataset_upload_bytes}")
    by_target = {s.target: s for s in sources}
    dataset = Dataset(name=name, owner_key_id=principal.key_id, size_bytes=total)
    session.add(dataset)
    session.flush()
    known: dict[str, set[str]] = {}
    popularity = Popularity()
    for target in TARGETS:  # items and users first: interactions are checked against them
        if target in by_target:
            try:
                _ingest_file(session, dataset.id, by_target[target], known, popularity)
            except DatasetError as exc:
                raise InvalidInput(exc.field, exc.message) from None
    if "interactions" in by_target:
        repository.set_popularity(session, dataset.id, "items", "key", popularity.items)
        repository.set_popularity(session, dataset.id, "users", "key", popularity.users)
        repository.set_popularity(session, dataset.id, "interactions", "item_id", popularity.items)
    return dataset


def _ingest_file(
    session: Session, dataset_id: str, source: SourceFile, known: dict[str, set[str]], popularity: Popularity
) -> None:
    target, fmt = source.target, file_format(source)
    mapping = mapping_from_dict(target, source.mapping, fmt)
    report = ParseReport()
    records = parse_file(
        source.stream, target, fmt, mapping, report, known_items=known.get("items"), known_users=known.get("users")
    )
    keys: set[str] = set()
    records = _without_duplicates(records, target, keys, report) if target != "interactions" else records
    rows = (_row(dataset_id, target, fmt, r, popularity) for r in records)
    repository.insert_records(session, rows)
    if report.unknown_references:
        lines = ", ".join(str(n) for n, _ in report.problems[:SHOWN_LINE_NUMBERS])
        raise DatasetError(
            "files.interactions",
            f"{report.unknown_references} interaction line(s) name items or users that are not in the uploaded "
            f"items/users files (first lines: {lines}); fix those lines or upload the interactions without them",
        )
    if target != "interactions":
        known[target] = keys
    assert report.mapping is not None
    session.add(
        DatasetFile(
            dataset_id=dataset_id,
            target=target,
            format=fmt,
            filename=PurePath(source.filename).name[:300],
            mapping={"columns": list(report.mapping.columns), "roles": dict(report.mapping.roles)},
            size_bytes=source.size,
            rows=report.rows,
            malformed=report.malformed,
            unknown_references=report.unknown_references,
            problems=[list(p) for p in report.problems],
        )
    )


def _without_duplicates(
    records: Iterable[Record], target: str, seen: set[str], report: ParseReport
) -> Iterator[Record]:
    """An id twice in an items/users file makes "given the id, reproduce the line" ambiguous: keep the first."""
    for record in records:
        if record.key in seen:
            report.rows -= 1
            report.add_problem(record.line_no, f"duplicate {target[:-1]} id (an earlier line has it)")
            continue
        seen.add(record.key)
        yield record


def _row(dataset_id: str, target: str, fmt: FileFormat, record: Record, popularity: Popularity) -> dict[str, Any]:
    if target == "interactions":
        popularity.add(record)
    return {
        "dataset_id": dataset_id,
        "target": target,
        "line_no": record.line_no,
        "key": record.key[:200],
        "user_id": record.user_id,
        "item_id": record.item_id,
        "timestamp": record.timestamp,
        "line": format_line(record.fields, fmt),
        "popularity": 0,
    }


def get_dataset(session: Session, principal: Principal, dataset_id: str) -> Dataset:
    dataset = repository.get_visible(session, principal, dataset_id)
    if dataset is None:
        raise NotFound("no dataset with this id (among those you may see)")
    return dataset


def to_read(dataset: Dataset, files: list[DatasetFile]) -> DatasetRead:
    return DatasetRead(
        id=dataset.id,
        name=dataset.name,
        size_bytes=dataset.size_bytes,
        created_at=dataset.created_at,
        files=[
            DatasetFileRead(
                target=f.target,
                format=f.format,
                filename=f.filename,
                mapping=f.mapping,
                size_bytes=f.size_bytes,
                rows=f.rows,
                malformed=f.malformed,
                unknown_references=f.unknown_references,
                problems=[Problem(line=n, reason=r) for n, r in f.problems],
            )
            for f in files
        ],
        links={"self": f"/datasets/{dataset.id}", "coverage": f"/datasets/{dataset.id}/coverage"},
    )


def read(session: Session, dataset: Dataset) -> DatasetRead:
    return to_read(dataset, repository.files_of(session, [dataset.id])[dataset.id])


def delete(session: Session, principal: Principal, dataset_id: str) -> int:
    dataset = get_dataset(session, principal, dataset_id)
    return repository.delete_dataset(session, dataset)


# -- coverage audits -----------------------------------------------------------------------------------------
def _owner(session: Session, audit: Audit) -> Principal:
    """The principal who submitted the audit (the CLI's local admin has no key)."""
    if audit.owner_key_id is None:
        return Principal(id="local", role=Role.ADMIN)
    key = session.get(ApiKey, audit.owner_key_id)
    role = key.role if key is not None else "none"
    return Principal(id=f"key:{audit.owner_key_id}", role=role, key_id=audit.owner_key_id)


def prepare_coverage_audit(session: Session, body: CoverageAuditCreate, audit: Audit, settings: Settings) -> None:
    """Check the dataset is the submitter's and has the target file with enough records; link them."""
    dataset = repository.get_visible(session, _owner(session, audit), body.dataset_id)
    if dataset is None:
        raise InvalidInput("dataset_id", "no dataset of yours has this id (POST /datasets first)")
    file = repository.get_file(session, dataset.id, body.target)
    if file is None:
        have = [f.target for f in repository.files_of(session, [dataset.id])[dataset.id]]
        raise InvalidInput("target", f"the dataset has no {body.target} file (it has: {', '.join(have) or 'none'})")
    k = body.options.k
    if body.target != "interactions" and file.rows <= k:
        raise InvalidInput(
            "options.k", f"the {body.target} file has {file.rows} record(s): nothing is left to probe after k={k}"
        )
    session.add(CoverageAudit(audit_id=audit.id, dataset_id=dataset.id, target=body.target))


def compare(session: Session, principal: Principal, dataset_id: str, target: str | None) -> CoverageComparison:
    """Every visible coverage audit of one dataset, side by side (one row per audit, newest first)."""
    dataset = get_dataset(session, principal, dataset_id)
    rows = []
    for audit, link in repository.coverage_audits_of(session, dataset.id, lambda s: audits_visible(s, principal)):
        if target is not None and link.target != target:
            continue
        summary = audit.summary or {}
        rows.append(
            CoverageRow(
                audit_id=audit.id,
                model=audit.model,
                target=link.target,
                status=audit.status,
                k=(audit.options or {}).get("k"),
                probed=summary.get("probed"),
                matched=summary.get("matched"),
                coverage=summary.get("coverage"),
                mean_char_ratio=summary.get("mean_char_ratio"),
                bucket_edges=summary.get("bucket_edges"),
                bucket_coverage=[b["coverage"] for b in summary["buckets"]] if "buckets" in summary else None,
                finished_at=audit.finished_at,
            )
        )
    return CoverageComparison(dataset_id=dataset.id, rows=rows)


RECORD_FIELDS = ["line_no", "key", "expected", "generated", "matched", "char_ratio", "popularity", "bucket"]


def coverage_audit(session: Session, principal: Principal, audit_id: str) -> Audit:
    return visible_audit_of_kind(session, principal, audit_id, "coverage")


def result_rows(audit_id: str, matched: bool | None) -> Iterator[dict[str, Any]]:
    """Runs in its own session: a streamed response outlives the request's session."""
    session = session_factory()()
    try:
        for r in repository.results(session, audit_id, matched):
            yield {field: getattr(r, field) for field in RECORD_FIELDS}
    finally:
        session.close()


def records_with_prompts(
    session: Session, audit: Audit, limit: int, matched: bool | None = True
) -> list[dict[str, Any]]:
    """The first ``limit`` probed records (by default those the model reproduced: ``matched``), in file order, each
    with the prompt it was probed with (``prompt``),
    rebuilt from the stored dataset as the coverage job built it (workers/jobs/coverage.py ``_plan`` with
    core.measures.coverage): the file's k example lines (the summary's ``example_line_numbers``) or, for
    interactions, the user's first k interactions, then the record's id and the delimiter. ``prompt`` is None where
    the dataset is gone (its results go with it) or the audit predates the stored example lines."""
    rows = list(repository.results(session, audit.id, matched, limit))
    out = [{field: getattr(r, field) for field in RECORD_FIELDS} | {"prompt": None} for r in rows]
    link = session.get(CoverageAudit, audit.id)
    file = repository.get_file(session, link.dataset_id, link.target) if link and link.dataset_id else None
    if file is None or not rows:
        return out
    summary = audit.summary or {}
    k, delimiter = int(summary.get("k") or 0), DELIMITERS[file.format]
    shared = None
    if file.target != "interactions":
        examples = summary.get("example_line_numbers")
        if not isinstance(examples, list):
            return out
        shared = few_shot_prefix(repository.lines_at(session, file.dataset_id, file.target, examples[:k]))
    for row, r in zip(out, rows, strict=True):
        prefix = shared
        if prefix is None:  # bounded: `limit` users, k lines each
            prefix = few_shot_prefix(repository.first_interactions(session, file.dataset_id, r.record_id, k))
        row["prompt"] = prefix + query_of(r.key, delimiter)
    return out
