"""Generation mode (issue 41): reading a model's sampled answers against a fact's values, and the fact's statistic.

An answer is read into one of four kinds: ``value`` (it names a value of the vocabulary — the fact's true values,
its counterfactuals and the property's pool — compared by meaning with the catalog's own rule,
``core.catalog.Property.value_key``: '196 cm' is '196 centimetres', a label case-folded), ``other`` (a date or a
quantity the vocabulary does not list: that value, normalised), ``refusal`` (the model declines or says it does not
know) or ``unreadable``. Whether a value is a true one is decided by the fact (its truths, and the counterfactuals
the near-duplicate rule merges into them): :func:`classify`.

The statistic (``STATISTIC``): the share of a fact's samples, over its K samples of every prompt, whose reading is a
true value, plus a tie-breaker below ``TIE`` drawn from a hash of the fact (``tiebreak``): shares are multiples of
1/(K · prompts), so many facts tie (most null facts at 0), and an empirical p-value that counts ties against the
fact would flag fewer than its level (valid, but conservative); the tie-breaker makes the test exact (a randomized
test, reproducible: the same fact, the same draw) and is smaller than any difference of two shares.

Misattribution (Art. 16, issue 42) in this mode: the share of a fact's samples that name its most-said *false* value
(a value of the vocabulary or an unlisted date or quantity that is no true value, nor a near-truth: the counterfactuals
the near-duplicate rule merges into a truth, and any other value said that the same rule would merge, ``near``), plus
its own tie-breaker (``misattribution``). Judged, like the scoring mode's soft lead, against the same statistic of the
null's fictitious people, but with every null fact of the same share counted against the fact (the verdict takes the
tie-breaker off: app.nulls.misattribution): conservative where the true share's test is exact. Pure functions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

STATISTIC = "true-share-1"  # enters a generation null's configuration key: bump when the statistic changes
TIE = 1e-4  # the tie-breaker's width: below 1 / (K · prompts) for up to 1,000 samples per fact
KINDS = ("true", "other", "refusal", "unreadable")
_REFUSAL = re.compile(
    r"\b(i (do not|don't|cannot|can't|am not|'m not) (know|say|sure|able|certain|have)|unknown|not known|no"
    r" (information|idea|record|data)|not (sure|available|certain)|sorry|i cannot|i can't|unsure|n/a)\b",
    re.IGNORECASE,
)
_LEAD = re.compile(r"^(?:(?:is|was|are|were|in|the|a|an|from|of|as|:)\s+)+", re.IGNORECASE)
_END = re.compile(r"\.(?!\d)|[,;!?()\[\]\"“”]|\s-\s")


class Valued(Protocol):
    """What reading needs of a property (core.catalog.Property is one)."""

    datatype: str

    def value_key(self, value: str) -> tuple: ...

    def normalize(self, value: str) -> str: ...


@dataclass(frozen=True)
class Reading:
    """One answer read: ``kind`` (value, other, refusal, unreadable) and the value it names (value, other)."""

    kind: str
    value: str | None = None


def clean(text: str, whole: bool = False) -> str:
    """The answer's first clause (``whole``: the whole first line), without leading link words ('is', 'in', 'a'),
    quotes and trailing punctuation."""
    head = " ".join(text.split()).lstrip(" '\"“`*_:")
    if not whole:
        head = _END.split(head, 1)[0]
    return _LEAD.sub("", head.strip(" '\"”`*_:.!?")).strip()


def read_answer(text: str, prop: Valued, vocabulary: Sequence[str]) -> Reading:
    """Read one answer against ``vocabulary`` (module docstring): the value whose meaning equals the whole answer or
    its first clause, else the longest value the clause starts with (at a word boundary), else a date or quantity of
    the property's datatype the vocabulary does not list, else a refusal, else unreadable."""
    texts = [t for t in dict.fromkeys((clean(text, whole=True), clean(text))) if t]
    keys = {prop.value_key(v): v for v in vocabulary}
    for t in texts:
        if (found := keys.get(prop.value_key(t))) is not None:
            return Reading("value", found)
    folded = texts[-1].casefold() if texts else ""
    starts = [v for v in vocabulary if folded.startswith(v.casefold()) and _boundary(folded, len(v))]
    if starts:
        return Reading("value", max(starts, key=len))
    for t in texts if prop.datatype in ("time", "quantity") else ():
        try:
            value = prop.normalize(t)
        except ValueError:
            continue
        return Reading("value", keys.get(prop.value_key(value), value))
    return Reading("refusal" if _REFUSAL.search(text) else "unreadable")


def _boundary(text: str, at: int) -> bool:
    return at == len(text) or not text[at].isalnum()


def classify(reading: Reading, prop: Valued, truths: Iterable[str]) -> str:
    """The reading's kind for one fact: ``true`` (a true value, or a value merged into one), ``other`` (another
    value), ``refusal`` or ``unreadable``."""
    if reading.kind != "value" or reading.value is None:
        return reading.kind
    return "true" if prop.value_key(reading.value) in {prop.value_key(t) for t in truths} else "other"


def true_share(readings: Sequence[Reading], prop: Valued, truths: Iterable[str]) -> float:
    """The share of ``readings`` that name a true value (0 with no readings)."""
    keys = {prop.value_key(t) for t in truths}
    hits = sum(r.kind == "value" and r.value is not None and prop.value_key(r.value) in keys for r in readings)
    return hits / len(readings) if readings else 0.0


def tiebreak(*parts: object) -> float:
    """A uniform draw in [0, TIE) from a hash of ``parts`` (who, which property, which values): the statistic's
    tie-breaker (module docstring)."""
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return TIE * int.from_bytes(digest[:8], "big") / 2**64


def statistic(share: float, *parts: object) -> float:
    """The verdict statistic of a fact in generation mode: its true share plus its tie-breaker."""
    return share + tiebreak(*parts)


def most_said_false(
    readings: Sequence[Reading], prop: Valued, truths: Iterable[str], near: Iterable[str] = ()
) -> tuple[str | None, int]:
    """The false value said most often among ``readings`` and how often (None, 0 where none is): values equal by
    meaning to a truth or to a near-truth in ``near`` are not false. Ties go to the value said first."""
    excluded = {prop.value_key(v) for v in (*truths, *near)}
    tally: dict[tuple, list] = {}
    for r in readings:
        if r.kind != "value" or r.value is None or (key := prop.value_key(r.value)) in excluded:
            continue
        tally.setdefault(key, [r.value, 0])[1] += 1
    if not tally:
        return None, 0
    value, n = max(tally.values(), key=lambda vn: vn[1])  # max keeps the first of equal counts
    return value, n


def misattribution(
    readings: Sequence[Reading], prop: Valued, truths: Iterable[str], near: Iterable[str], *parts: object
) -> tuple[float, str | None]:
    """(statistic, value): the most-said false value's share of ``readings`` plus a tie-breaker drawn from ``parts``
    (the fact) apart from the verdict's, and that value (None where no answer names a false value: share 0)."""
    value, n = most_said_false(readings, prop, truths, near)
    share = n / len(readings) if readings else 0.0
    return share + tiebreak("misattribution", *parts), value


def counts(kinds: Iterable[str]) -> dict[str, int]:
    """How many samples of each kind (every kind present, 0 where none)."""
    out = dict.fromkeys(KINDS, 0)
    for kind in kinds:
        out[kind] += 1
    return out
