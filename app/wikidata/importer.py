"""`memaudit import-wikidata DUMP`: load humans (P31 = Q5), their catalog facts, property metadata and
counterfactual pools from an official JSON dump into the database.

Three streaming passes over the file (nothing is held but counters and labels): (1) count values per property
and collect the items that facts point to; (2) read those items' labels; (3) store humans in batches. Each batch
commits together with the import's checkpoint (``last_line``), so an interrupted import re-run on the same file
resumes after its last complete batch and never leaves a half-written batch. Pools (every distinct value of a
property used by >= 100 humans, the paper's construction) are written once, at the end, in one transaction.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Fact, PoolValue, Subject, WikidataImport, WikidataProperty
from app.db.models.wikidata import ImportStatus
from app.wikidata.dump import MIN_HUMANS_FOR_POOL, DumpHuman, DumpReader, resolve
from app.wikidata.repository import ensure_properties
from app.wikidata.snaks import ItemRef, Value
from core.catalog import Catalog, ValueProblem, load_catalog

BATCH = 500


@dataclass
class ImportReport:
    """Counts only (no names, no facts): safe to print and log."""

    import_id: int
    resumed_after_line: int
    humans: int
    facts: int
    skipped_humans: int
    bad_lines: int
    bad_line_numbers: list[int]
    truncated: bool
    pools: dict[str, int] = field(default_factory=dict)  # pid -> pool size
    properties: int = 0


def fingerprint(path: Path) -> str:
    stat = path.stat()
    return hashlib.sha256(f"{path.name}:{stat.st_size}:{int(stat.st_mtime)}".encode()).hexdigest()


def _open_import(path: Path) -> tuple[int, int]:
    """(import id, line to resume after): an unfinished import of the same file resumes."""
    fp = fingerprint(path)
    with session_scope() as s:
        running = s.scalars(
            select(WikidataImport)
            .where(WikidataImport.fingerprint == fp, WikidataImport.status == ImportStatus.RUNNING)
            .order_by(WikidataImport.id.desc())
            .limit(1)
        ).first()
        if running is not None:
            return running.id, running.last_line
        row = WikidataImport(
            path=str(path)[:1000],
            fingerprint=fp,
            status=ImportStatus.RUNNING,
            last_line=0,
            humans=0,
            facts=0,
            skipped_humans=0,
            bad_lines=0,
            bad_line_numbers=[],
        )
        s.add(row)
        s.flush()
        return row.id, 0


def import_dump(
    path: str | os.PathLike[str],
    *,
    batch_size: int = BATCH,
    min_humans: int = MIN_HUMANS_FOR_POOL,
    on_batch: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import a dump file; ``on_batch(humans stored so far)`` is called after each committed batch."""
    path = Path(path)
    catalog = load_catalog()
    value_types = {p.pid: p.value_type for p in catalog}
    import_id, resume_after = _open_import(path)
    scan = DumpReader(path, catalog.pids, value_types)
    for _ in scan.humans():  # pass 1: counts, referenced items, property metadata, bad lines
        pass
    labels = scan.labels(scan.referenced_items())  # pass 2
    with session_scope() as s:
        ensure_properties(s, set(catalog.pids))
        _store_properties(s, scan, import_id)
    stored = DumpReader(path, catalog.pids, value_types)  # pass 3, after the checkpoint
    batch: list[DumpHuman] = []
    for human in stored.humans(start_line=resume_after):
        batch.append(human)
        if len(batch) >= batch_size:
            _store_batch(import_id, batch, labels, catalog, on_batch)
            batch = []
    if batch:
        _store_batch(import_id, batch, labels, catalog, on_batch)
    pools = scan.pools(labels, min_humans)
    return _finish(import_id, scan, pools, labels, resume_after)


def _store_properties(s: Session, scan: DumpReader, import_id: int) -> None:
    for meta in scan.properties.values():
        row = s.get(WikidataProperty, meta.pid) or WikidataProperty(pid=meta.pid)
        row.label, row.description, row.datatype = meta.label[:300], meta.description, meta.datatype[:32]
        row.aliases, row.import_id = list(meta.aliases), import_id
        s.add(row)


def _usable_facts(human: DumpHuman, labels: dict[str, str], catalog: Catalog) -> list[tuple[str, str]]:
    facts = []
    for pid, value in resolve(human.facts, labels):
        value = " ".join(value.split())
        try:
            facts.append((pid, catalog.get(pid).normalize(value)))
        except ValueProblem:
            continue
    return list(dict.fromkeys(facts))


def _store_batch(
    import_id: int,
    batch: list[DumpHuman],
    labels: dict[str, str],
    catalog: Catalog,
    on_batch: Callable[[int], None] | None,
) -> None:
    with session_scope() as s:
        qids = [h.qid for h in batch]
        present = set(
            s.scalars(select(Subject.wikidata_id).where(Subject.wikidata_id.in_(qids), Subject.owner_key_id.is_(None)))
        )
        imp = s.get(WikidataImport, import_id)
        for human in batch:
            facts = _usable_facts(human, labels, catalog)
            if not facts or human.qid in present or len(human.name) > 200:
                imp.skipped_humans += 1
                continue
            subject = Subject(name=human.name, wikidata_id=human.qid, owner_key_id=None)
            subject.facts = [Fact(property_id=pid, value=v, source="dump") for pid, v in facts]
            s.add(subject)
            present.add(human.qid)
            imp.humans += 1
            imp.facts += len(facts)
        imp.last_line = batch[-1].line_number  # commits with the batch: the resume point
        stored = imp.humans
    if on_batch is not None:
        on_batch(stored)


def _finish(
    import_id: int, scan: DumpReader, pools: dict[str, list[str]], labels: dict[str, str], resumed: int
) -> ImportReport:
    counts = scan.value_counts
    with session_scope() as s:
        s.execute(delete(PoolValue).where(PoolValue.import_id == import_id))
        for pid, values in pools.items():
            by_label = _humans_by_label(counts[pid], values, labels)
            s.add_all(
                PoolValue(import_id=import_id, property_id=pid, position=i, value=v, humans=by_label[v])
                for i, v in enumerate(values)
            )
        imp = s.get(WikidataImport, import_id)
        imp.status, imp.finished_at = ImportStatus.SUCCEEDED, utcnow()
        imp.bad_lines, imp.bad_line_numbers = scan.report.bad_lines, list(scan.report.bad_line_numbers)
        imp.truncated = scan.report.truncated
        return ImportReport(
            import_id=import_id,
            resumed_after_line=resumed,
            humans=imp.humans,
            facts=imp.facts,
            skipped_humans=imp.skipped_humans,
            bad_lines=imp.bad_lines,
            bad_line_numbers=imp.bad_line_numbers,
            truncated=imp.truncated,
            pools={pid: len(v) for pid, v in pools.items()},
            properties=len(scan.properties),
        )


def _humans_by_label(counts: Counter[Value], values: list[str], labels: dict[str, str]) -> dict[str, int]:
    """Humans per pool value; two items may share a label, so their counts add up."""
    by_label = dict.fromkeys(values, 0)
    for value, n in counts.items():
        label = labels.get(value.qid) if isinstance(value, ItemRef) else value
        if label in by_label:
            by_label[label] += n
    return by_label
