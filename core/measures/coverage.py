"""Dataset coverage (Di Palma et al., 2025, "Do LLMs memorize recommendation datasets?").

Pure functions: plain strings and numbers in and out.

A record is *covered* when the model, shown k example lines of the same file in the file's own format
and then the record's id followed by the delimiter, greedily generates the rest of the record's line
exactly (after :func:`normalise_line`). Coverage of a set of records is the share covered:
Cov(I, P_I) = |M(I, P_I)| / |I|. The fuzzy character ratio is kept next to it for reading, never counted
as a match.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The paper's released code (sisinflab/LLM-MemoryInspector, src/llm_requests.py) seeds every prompt
# with three example records of the same file.
DEFAULT_K = 3
DEFAULT_BUCKETS = 4
BUDGET_SLACK_TOKENS = 16

_SPACES = re.compile(r"\s+")


def few_shot_prefix(example_lines: Sequence[str], header: str | None = None) -> str:
    """The shared part of every prompt of a probe: an optional header line, then k example lines."""
    head = f"{header}\n" if header else ""
    return head + "".join(f"{line}\n" for line in example_lines)


def query_of(key: str, delimiter: str) -> str:
    """What the model is given for a record: its id followed by the delimiter ("17::")."""
    return f"{key}{delimiter}"


def expected_continuation(line: str, key: str, delimiter: str) -> str:
    """The rest of the record's line after its id and delimiter: what the model must reproduce."""
    head = query_of(key, delimiter)
    if not line.startswith(head):
        raise ValueError("a record's line must start with its id and the delimiter")
    return line[len(head) :]


def generation_budget(expected: Sequence[str], slack: int = BUDGET_SLACK_TOKENS) -> int:
    """max_new_tokens that reproduces the longest expected line and overruns it.

    A byte-level BPE token is at least one byte, so a generation cut at this length is longer than every
    expected line: truncation can never make a false exact match.
    """
    return max((len(e.encode("utf-8")) for e in expected), default=0) + slack


def first_line(generated: str) -> str:
    """Generation stops at the end of the line: only the first line counts."""
    return generated.split("\n", 1)[0].rstrip("\r")


def normalise_line(text: str, delimiter: str) -> str:
    """NFKC, whitespace collapsed and stripped, including around each delimiter. Case is kept: a title
    in the wrong case is not the dataset's record."""
    text = unicodedata.normalize("NFKC", first_line(text))
    parts = text.split(delimiter) if delimiter.strip() else [text]
    return delimiter.join(_SPACES.sub(" ", p).strip() for p in parts)


def comparable(text: str, delimiter: str, columns: Sequence[int] | None = None) -> str:
    """The normalised line, restricted to some field positions (``None``: every field)."""
    normal = normalise_line(text, delimiter)
    if columns is None:
        return normal
    fields = normal.split(delimiter)
    return delimiter.join(fields[i] if i < len(fields) else "\x00missing" for i in columns)


def exact_match(generated: str, expected: str, delimiter: str, columns: Sequence[int] | None = None) -> bool:
    """M(I, P_I) membership: the generated continuation equals the record's, once normalised."""
    return comparable(generated, delimiter, columns) == comparable(expected, delimiter, columns)


def char_ratio(a: str, b: str) -> float:
    """Indel similarity 2·LCS(a, b) / (|a| + |b|) in [0, 1] (rapidfuzz's ``fuzz.ratio`` / 100)."""
    if not a and not b:
        return 1.0
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if ch == other else max(previous[j], current[j - 1]))
        previous = current
    return 2 * previous[-1] / (len(a) + len(b))


def coverage(matched: Sequence[bool]) -> float:
    """Cov = |matched| / |probed|; 0 for an empty probe."""
    return float(sum(bool(m) for m in matched) / len(matched)) if matched else 0.0


def quantile_edges(popularity: Sequence[float], n_buckets: int = DEFAULT_BUCKETS) -> list[float]:
    """Bucket edges at the popularity quantiles: [min, q_1/n, ..., max], ties collapsed, no empty bucket.

    Interaction counts are heavily tied (many items have one or two interactions), so repeated
    quantiles are merged, and an interior edge that would close an empty bucket (an edge of 2.5 between
    counts 2 and 3) is dropped: there may be fewer than ``n_buckets`` buckets, never an empty one.
    """
    if n_buckets < 1:
        raise ValueError("n_buckets must be at least 1")
    if not len(popularity):
        return []
    values = np.sort(np.asarray(popularity, dtype=float))
    qs = np.quantile(values, np.linspace(0.0, 1.0, n_buckets + 1)).tolist()
    if qs[-1] == qs[0]:
        return [float(qs[0]), float(qs[0])]
    edges = [float(qs[0])]
    for q in qs[1:-1]:
        lower = int(np.searchsorted(values, edges[-1], side="right")) if len(edges) > 1 else 0
        if edges[-1] < q < qs[-1] and int(np.searchsorted(values, q, side="right")) > lower:
            edges.append(float(q))
    return [*edges, float(qs[-1])]


def bucket_of(value: float, edges: Sequence[float]) -> int:
    """Bucket j holds edges[j] < value ≤ edges[j+1]; the first bucket also holds edges[0]."""
    for j in range(1, len(edges) - 1):
        if value <= edges[j]:
            return j - 1
    return max(len(edges) - 2, 0)


@dataclass(frozen=True)
class BucketCoverage:
    bucket: int
    low: float
    high: float
    probed: int
    matched: int
    coverage: float
    mean_char_ratio: float


def coverage_by_bucket(
    matched: Sequence[bool],
    popularity: Sequence[float],
    edges: Sequence[float],
    char_ratios: Sequence[float] | None = None,
) -> list[BucketCoverage]:
    """Coverage per popularity bucket (the paper's popular-vs-rare split, generalised to quantiles)."""
    if len(matched) != len(popularity):
        raise ValueError("matched and popularity must have one entry per probed record")
    n_buckets = max(len(edges) - 1, 0)
    ratios = list(char_ratios) if char_ratios is not None else [0.0] * len(matched)
    probed, hits, ratio_sum = [0] * n_buckets, [0] * n_buckets, [0.0] * n_buckets
    for m, p, r in zip(matched, popularity, ratios, strict=True):
        j = bucket_of(p, edges)
        probed[j] += 1
        hits[j] += int(bool(m))
        ratio_sum[j] += r
    return [
        BucketCoverage(
            bucket=j,
            low=float(edges[j]),
            high=float(edges[j + 1]),
            probed=probed[j],
            matched=hits[j],
            coverage=hits[j] / probed[j] if probed[j] else 0.0,
            mean_char_ratio=ratio_sum[j] / probed[j] if probed[j] else 0.0,
        )
        for j in range(n_buckets)
    ]


@dataclass(frozen=True)
class ProbeRecord:
    """A record to probe: its key (the id shown to the model), its line in the file's own format, and the
    popularity it is bucketed by."""

    key: str
    line: str
    popularity: float = 0.0
    ref: int | None = None  # the caller's handle on the record (a database id); not used here


@dataclass(frozen=True)
class ProbePrompt:
    record: ProbeRecord
    prefix: str  # shared by every prompt of an items/users probe; the user's history for interactions
    query: str
    expected: str

    @property
    def prompt(self) -> str:
        return self.prefix + self.query


@dataclass(frozen=True)
class Outcome:
    key: str
    generated: str
    expected: str
    matched: bool
    char_ratio: float
    popularity: float


def sample_indices(n: int, sample: int | None, seed: int) -> list[int]:
    """All of 0..n-1, or a seeded sample of ``sample`` of them, in file order."""
    if sample is None or sample >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size=sample, replace=False).tolist())


def record_prompts(
    records: Sequence[ProbeRecord],
    delimiter: str,
    k: int = DEFAULT_K,
    sample: int | None = None,
    seed: int = 0,
) -> list[ProbePrompt]:
    """Items/users probe: the first k records of the file are the examples; every other record (or a
    seeded sample of them) is probed. The examples are not probed: their answer is in the prompt."""
    prefix = few_shot_prefix([r.line for r in records[:k]])
    candidates = records[k:]
    return [
        ProbePrompt(r, prefix, query_of(r.key, delimiter), expected_continuation(r.line, r.key, delimiter))
        for r in (candidates[i] for i in sample_indices(len(candidates), sample, seed))
    ]


def interaction_prompts(
    histories: Sequence[Sequence[ProbeRecord]],
    delimiter: str,
    k: int = DEFAULT_K,
    sample: int | None = None,
    seed: int = 0,
) -> list[ProbePrompt]:
    """Interactions probe: for each user (one history each, in time order, keyed by the user id), the
    user's first k interaction lines, then the user id: the model must produce the (k+1)-th interaction.
    Users with k or fewer interactions have nothing to predict and are skipped."""
    eligible = [h for h in histories if len(h) > k]
    prompts = []
    for i in sample_indices(len(eligible), sample, seed):
        history = eligible[i]
        target = history[k]
        prefix = few_shot_prefix([r.line for r in history[:k]])
        expected = expected_continuation(target.line, target.key, delimiter)
        prompts.append(ProbePrompt(target, prefix, query_of(target.key, delimiter), expected))
    return prompts


def judge(prompt: ProbePrompt, generated: str, delimiter: str, columns: Sequence[int] | None = None) -> Outcome:
    """Exact match on the normalised first line; the fuzzy ratio is computed on the same lines."""
    line = first_line(generated)
    ratio = char_ratio(normalise_line(line, delimiter), normalise_line(prompt.expected, delimiter))
    return Outcome(
        key=prompt.record.key,
        generated=line,
        expected=prompt.expected,
        matched=exact_match(line, prompt.expected, delimiter, columns),
        char_ratio=ratio,
        popularity=prompt.record.popularity,
    )


def summarise(outcomes: Sequence[Outcome], n_buckets: int = DEFAULT_BUCKETS) -> dict:
    """Coverage overall and per popularity bucket, with the bucket edges, as plain JSON-ready types."""
    matched = [o.matched for o in outcomes]
    popularity = [o.popularity for o in outcomes]
    ratios = [o.char_ratio for o in outcomes]
    edges = quantile_edges(popularity, n_buckets)
    return {
        "probed": len(outcomes),
        "matched": sum(matched),
        "coverage": coverage(matched),
        "mean_char_ratio": float(np.mean(ratios)) if ratios else 0.0,
        "bucket_edges": edges,
        "buckets": [b.__dict__ for b in coverage_by_bucket(matched, popularity, edges, ratios)],
    }
