"""Coverage audit job (Di Palma et al., 2025): probe a dataset file's records with few-shot prompts, greedy
decoding, exact match on the normalised line, and store per-record outcomes and coverage by popularity bucket.

Loads everything by audit id; safe to run twice (records already probed are kept and skipped, so a
restarted job resumes); stops at the next batch when the audit is cancelled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.coverage import repository
from app.coverage.formats import DELIMITERS
from app.coverage.schemas import CoverageOptions
from app.db.engine import session_scope
from app.db.models import CoverageAudit, DatasetFile, DatasetRecord
from core.measures.coverage import (
    ProbePrompt,
    ProbeRecord,
    bucket_of,
    coverage_by_bucket,
    generation_budget,
    interaction_prompts,
    judge,
    quantile_edges,
    record_prompts,
)
from workers.jobs.common import JobContext, JobError, run_audit_job
from workers.lm.base import Scorer, ScoringError

POPULARITY = {
    "items": "interactions of the item",
    "users": "interactions of the user",
    "interactions": "interactions of the predicted interaction's item",
}


def run(audit_id: str) -> None:
    run_audit_job(audit_id, "coverage", CoverageOptions, _audit)


class _Planner:
    """Turns stored records into probe prompts, remembering each record's line number."""

    def __init__(self) -> None:
        self.line_nos: dict[int, int] = {}

    def record(self, r: DatasetRecord) -> ProbeRecord:
        self.line_nos[r.id] = r.line_no
        return ProbeRecord(r.key, r.line, float(r.popularity), ref=r.id)

    def histories(self, records: Iterator[DatasetRecord], k: int) -> Iterator[list[ProbeRecord]]:
        """Each user's first k+1 interactions in time order (the rest is never needed)."""
        user, history = None, []
        for r in records:
            if r.user_id != user:
                if history:
                    yield history
                user, history = r.user_id, []
            if len(history) <= k:
                history.append(self.record(r))
        if history:
            yield history


def _plan(ctx: JobContext, options: CoverageOptions) -> tuple[list[ProbePrompt], DatasetFile, dict, dict[int, int]]:
    planner = _Planner()
    with session_scope() as s:
        link = s.get(CoverageAudit, ctx.audit_id)
        if link is None or link.dataset_id is None:
            raise JobError("the audit's dataset no longer exists (deleted?)")
        file = repository.get_file(s, link.dataset_id, link.target)
        if file is None:
            raise JobError(f"the dataset has no {link.target} file")
        s.expunge(file)
        delimiter, k = DELIMITERS[file.format], options.k
        info: dict[str, Any] = {"dataset_id": link.dataset_id, "target": link.target, "file_rows": file.rows}
        if link.target == "interactions":
            histories = list(planner.histories(repository.interactions_by_user(s, link.dataset_id), k))
            prompts = interaction_prompts(histories, delimiter, k, options.sample, options.seed)
            info["users_with_too_few_interactions"] = sum(len(h) <= k for h in histories)
        else:
            records = [planner.record(r) for r in repository.records_in_file_order(s, link.dataset_id, link.target)]
            prompts = record_prompts(records, delimiter, k, options.sample, options.seed)
            info["example_line_numbers"] = [planner.line_nos[r.ref] for r in records[:k] if r.ref is not None]
    if not prompts:
        raise JobError(f"nothing to probe: no {link.target} record has {k} example record(s) before it (lower k)")
    return prompts, file, info, planner.line_nos


def compared_columns(file: DatasetFile, match_timestamp: bool) -> list[int] | None:
    """Positions, in the continuation after the id, of the fields an exact match compares. Interactions
    leave the timestamp out unless asked: the paper's memorized interaction is (item, rating)."""
    timestamp = (file.mapping.get("roles") or {}).get("timestamp")
    if file.target != "interactions" or match_timestamp or timestamp is None:
        return None
    rest = list(file.mapping["columns"])[1:]
    return [i for i, column in enumerate(rest) if column != timestamp]


def batches(prompts: list[ProbePrompt], size: int) -> Iterator[list[ProbePrompt]]:
    """Batches of prompts that share one few-shot prefix (so a backend can compute it once)."""
    by_prefix: dict[str, list[ProbePrompt]] = defaultdict(list)
    for p in prompts:
        by_prefix[p.prefix].append(p)
    pending: list[ProbePrompt] = []
    for group in by_prefix.values():
        if len(group) >= size:
            for start in range(0, len(group), size):
                yield group[start : start + size]
        else:  # interactions: every user has their own prefix; batch them together anyway
            pending.extend(group)
            if len(pending) >= size:
                yield pending
                pending = []
    if pending:
        yield pending


def _generate(scorer: Scorer, prompts: list[ProbePrompt], budget: int) -> list[str]:
    try:
        return scorer.generate([p.prompt for p in prompts], budget, stop="\n")
    except ScoringError as exc:  # names an index, never the record's text
        raise JobError(f"cannot probe a record: {exc}; lower k or max_new_tokens") from exc


def _result_row(audit_id: str, prompt: ProbePrompt, generated: str, delimiter: str, columns) -> dict[str, Any]:
    outcome = judge(prompt, generated, delimiter, columns)
    return {
        "audit_id": audit_id,
        "record_id": prompt.record.ref,
        "line_no": 0,
        "key": prompt.record.key[:200],
        "expected": outcome.expected,
        "generated": outcome.generated,
        "matched": outcome.matched,
        "char_ratio": outcome.char_ratio,
        "popularity": outcome.popularity,
        "bucket": None,
    }


def _audit(ctx: JobContext[CoverageOptions]) -> dict[str, Any]:
    options = ctx.options
    prompts, file, info, line_nos = _plan(ctx, options)
    with session_scope() as s:
        done_refs = repository.result_record_ids(s, ctx.audit_id)
    todo = [p for p in prompts if p.record.ref not in done_refs]
    total, done = len(prompts), len(prompts) - len(todo)
    ctx.progress(done, total, force=True)
    scorer = ctx.scorer()
    budget = options.max_new_tokens or generation_budget([p.expected for p in prompts])
    delimiter, columns = DELIMITERS[file.format], compared_columns(file, options.match_timestamp)
    for batch in batches(todo, options.batch_size):
        generated = _generate(scorer, batch, budget)
        rows = [_result_row(ctx.audit_id, p, g, delimiter, columns) for p, g in zip(batch, generated, strict=True)]
        for row in rows:
            row["line_no"] = line_nos[row["record_id"]]
        _store(rows)
        done += len(batch)
        ctx.progress(done, total)
    ctx.check_cancelled()
    summary = _summarise(ctx.audit_id, options.buckets)
    decoding = {
        "strategy": "greedy",
        "do_sample": False,
        "temperature": 0.0,
        "num_beams": 1,
        "stop": "\\n",
        "max_new_tokens": budget,
    }
    match = {
        "normalisation": "NFKC; whitespace collapsed; spaces around delimiters removed; case kept",
        "compared_fields": "all" if columns is None else [file.mapping["columns"][i + 1] for i in columns],
        "fuzzy": "character ratio 2*LCS/(|a|+|b|), stored, never counted as a match",
    }
    return {
        **info,
        **summary,
        "k": options.k,
        "popularity": POPULARITY[file.target],
        "decoding": decoding,
        "match": match,
        "model_fingerprint": getattr(scorer, "fingerprint", None),
    }


def _store(rows: list[dict[str, Any]]) -> None:
    try:
        with session_scope() as s:
            repository.add_results(s, rows)
    except IntegrityError as exc:  # the records an outcome points to are gone
        raise JobError("the audit's dataset was deleted while the audit ran") from exc


def _summarise(audit_id: str, n_buckets: int) -> dict[str, Any]:
    """Coverage overall and per popularity bucket over every stored outcome; stores each outcome's bucket."""
    with session_scope() as s:
        stats = repository.result_stats(s, audit_id)
        matched = [m for _, m, _, _ in stats]
        popularity = [p for _, _, p, _ in stats]
        ratios = [r for _, _, _, r in stats]
        edges = quantile_edges(popularity, n_buckets)
        repository.set_buckets(s, {i: bucket_of(p, edges) for i, _, p, _ in stats})
    buckets = coverage_by_bucket(matched, popularity, edges, ratios)
    return {
        "probed": len(stats),
        "matched": sum(matched),
        "coverage": sum(matched) / len(stats) if stats else 0.0,
        "mean_char_ratio": sum(ratios) / len(ratios) if ratios else 0.0,
        "bucket_edges": edges,
        "buckets": [b.__dict__ for b in buckets],
    }
