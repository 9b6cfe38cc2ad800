"""Look-alike names S(h) for the calibrated score, in two schemes.

* ``reversed`` — WikiMem's: the letters of one name part reversed ("Jane Doe" -> "Enaj Doe", "Jane Eod").
* ``same_origin`` — beyond the paper: other names *of the same origin* ("Hiroshi Tanaka" -> "Kenji Sato",
  "Akira Suzuki"): every name part is replaced by a name of the same origin (and, for first names, the same
  gender) from Faker's locale lists. Whatever a model infers from where a name comes from (citizenship, language,
  birthplace, gender) is then in the baseline and cancels; reversed letters destroy exactly that signal, so with
  them inference passes for memorization.

The origin is read from the name alone (which locales list its parts), never from the subject's facts: choosing
look-alikes from the facts would put the true value into the baseline and cancel real memorization. A name none
of whose parts any origin lists falls back to the reversed scheme (and says so).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from core.measures.wikimem import similar_names
from core.names.origins import BY_LOCALE, GENDERS, ORIGINS, NameLists, name_lists

SCHEMES = ("reversed", "same_origin")
# The name-origin reader's version. Same-origin look-alikes depend on it (which origin a name is read as): a subject
# audit records it, a null's key holds it, and an audit is judged only against a null whose names were read alike.
READER = "common-names-2"
READER_BEFORE = "faker-lists-1"  # what an audit that records no reader used: Faker's lists alone
READER_NAMES = Path(__file__).with_name("reader_names.json")  # common names per origin, read by the reader only
LIST_BONUS = 10.0  # weight of an exact list match against the trigram likelihood (chosen on the labelled names)
SMOOTHING = 0.01  # additive smoothing of trigram weights
MAX_DRAWS = 50  # per wanted variant: a bound on the rejection loop (a draw may equal the name or a variant)


# Letters Unicode does not decompose into a base letter and a mark, folded as a name is written without them
# ("Yıldız" as "Yildiz", "Łukasz" as "Lukasz", "Søren" as "Soren").
_UNDECOMPOSED = str.maketrans(
    {"ı": "i", "ł": "l", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "æ": "ae", "œ": "oe", "ß": "ss", "ɔ": "o", "ɛ": "e"}
)


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """Case- and accent-insensitive key: 'José' and 'jose' match, and 'Yıldız' and 'Yildiz' (cached: the origin
    reader folds the same name parts for every look-alike it draws)."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).translate(_UNDECOMPOSED)


@dataclass(frozen=True)
class NameOrigin:
    locales: tuple[str, ...]  # every origin whose lists hold the name's parts (most specific match)
    gender: str | None  # "male" | "female" when the first name is listed for one gender only


@cache
def reader_lists(locale: str) -> NameLists:
    """What the origin reader knows of one origin: Faker's lists (what look-alikes are drawn from) and the common
    given names and surnames of ``reader_names.json`` (hand-written, read only here: Faker's lists miss many of the
    commonest names — Turkish "Ahmet" and "Öztürk", Italian "Colombo" and "Ferri" — and list immigrant names
    under other countries, so a reader of Faker's lists alone put 76 of the roster's 775 names in another
    tradition; docs/measures.md, "Look-alike names")."""
    faker = name_lists(locale)
    common = _reader_names().get(locale, {})
    return NameLists(
        {g: tuple(dict.fromkeys((*faker.first[g], *common.get(g, ())))) for g in GENDERS},
        {g: tuple(dict.fromkeys((*faker.last[g], *common.get(f"last_{g}", ())))) for g in GENDERS},
    )


@cache
def _reader_names() -> dict[str, dict[str, list[str]]]:
    return dict(json.loads(READER_NAMES.read_text(encoding="utf-8"))["origins"])


@cache
def _index() -> dict[str, dict[str, set[str]]]:
    """role ("male", "female", "last") -> folded name -> locales listing it."""
    index: dict[str, dict[str, set[str]]] = {role: defaultdict(set) for role in ("male", "female", "last")}
    for origin in ORIGINS:
        lists = reader_lists(origin.locale)
        for gender in GENDERS:
            for name in lists.first[gender]:
                index[gender][fold(name)].add(origin.locale)
            for name in lists.last[gender]:
                index["last"][fold(name)].add(origin.locale)
    return index


def _trigrams(word: str) -> list[str]:
    padded = f"^{fold(word)}$"
    return [padded[i : i + 3] for i in range(len(padded) - 2)]


@cache
def _trigram_model() -> tuple[dict[str, dict[str, float]], dict[str, float], int]:
    """Per region: weighted letter-trigram counts of its names (each locale weighs the same), their total, and the
    vocabulary size — a naive-Bayes model that places names no list holds ("Putin", "Dostoevsky")."""
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    totals: dict[str, float] = defaultdict(float)
    for origin in ORIGINS:
        lists = reader_lists(origin.locale)
        names = {n for g in GENDERS for n in (*lists.first[g], *lists.last[g])}
        weight = 1.0 / len(names)
        for name in names:
            for gram in _trigrams(name):
                counts[origin.region][gram] += weight
                totals[origin.region] += weight
    vocabulary = len({g for c in counts.values() for g in c})
    return {r: dict(c) for r, c in counts.items()}, dict(totals), vocabulary


def _listed(part: str, first: bool) -> set[str]:
    index = _index()
    roles = ("male", "female") if first else ("last",)
    return set().union(*(index[role].get(fold(part), set()) for role in roles))


def prepare_reader() -> None:
    """Build the origin reader's tables now — every origin's lists, their index, the trigram model (~0.7 CPU-s) —
    instead of at this process's first :func:`name_origin`: a parent that forks processes which read names (the
    test suite's zygote, tests/support/zygote.py) builds them once for all of its children."""
    _index()
    _trigram_model()
    _region_sizes()


@lru_cache(maxsize=4096)
def name_origin(name: str) -> NameOrigin | None:
    """The origin of a name: the naming tradition (region) that best explains its first and last part, then the
    locales of that region whose lists hold a part (all of the region's when none does); None for a name with no
    letters. A region's score is the naive-Bayes log-likelihood of the parts' letter trigrams plus LIST_BONUS times
    the share of the region's locales that list each part (Faker's lists overlap: immigrant names such as
    "Vladimir" are listed for Germany and Chile too, so an exact match alone misleads). Measured on 46 hand-labelled
    names (benchmarks/calibration_cohorts.json): 38 placed in the expected tradition; the misses are neighbours
    (Cristiano Ronaldo -> hispanic, Lionel Messi -> germanic). Cached: a name's origin is read at its audit's
    submission and again by its job, and a null reads each of its people's."""
    parts = [p for p in name.split() if any(c.isalpha() for c in p)]
    if not parts:
        return None
    ends = [parts[0]] if len(parts) == 1 else [parts[0], parts[-1]]
    listed = [_listed(part, i == 0) for i, part in enumerate(ends)]
    counts, totals, vocabulary = _trigram_model()
    size = _region_sizes()
    hits = Counter(BY_LOCALE[loc].region for found in listed for loc in found)  # each part's listing locales
    best, best_score = "", -math.inf
    for region in sorted(counts):
        grams = counts[region]
        score = sum(
            math.log((grams.get(g, 0.0) + SMOOTHING) / (totals[region] + SMOOTHING * vocabulary))
            for part in parts
            for g in _trigrams(part)
        )
        score += LIST_BONUS * hits[region] / size[region]
        if score > best_score:
            best, best_score = region, score
    in_region = sorted({loc for found in listed for loc in found if BY_LOCALE[loc].region == best})
    locales = tuple(in_region) or tuple(sorted(loc for loc in BY_LOCALE if BY_LOCALE[loc].region == best))
    first = fold(parts[0])
    return NameOrigin(locales, _gender(first, locales) or _gender(first, tuple(BY_LOCALE)))


@cache
def _region_sizes() -> Counter[str]:
    return Counter(BY_LOCALE[loc].region for loc in BY_LOCALE)


def _gender(first: str, locales: tuple[str, ...]) -> str | None:
    index = _index()
    male = bool(index["male"].get(first, set()) & set(locales))
    female = bool(index["female"].get(first, set()) & set(locales))
    return "male" if male and not female else "female" if female and not male else None


def _pools(origin: NameOrigin) -> tuple[list[str], list[str]]:
    genders = (origin.gender,) if origin.gender else GENDERS
    first: dict[str, None] = {}
    last: dict[str, None] = {}
    for locale in origin.locales:
        lists = name_lists(locale)
        for g in genders:
            first.update(dict.fromkeys(lists.first[g]))
            last.update(dict.fromkeys(lists.last[g]))
    return list(first), list(last)


@lru_cache(maxsize=256)
def _folded_pools(origin: NameOrigin) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """Each pool name with its fold, in ``_pools``'s order: folded once per origin, not once per name looked up (a
    batch's 100 sampled people folded about 4,700 pool names each: 16 s of a 2,000-person batch's request)."""
    firsts, lasts = _pools(origin)
    return tuple((f, fold(f)) for f in firsts), tuple((x, fold(x)) for x in lasts)


def same_origin_names(name: str, n: int, origin: NameOrigin) -> list[str]:
    """n distinct names of the given origin, sharing no part with ``name``; deterministic given the name.
    Fewer than n when the origin's lists are too small."""
    parts = name.split()
    first_pool, last_pool = _folded_pools(origin)
    folded = {fold(p) for p in parts}
    firsts = [f for f, key in first_pool if key not in folded]
    lasts = [x for x, key in last_pool if key not in folded]
    if not firsts or (len(parts) > 1 and not lasts):
        return []
    rng = random.Random(int.from_bytes(hashlib.sha256(f"same_origin:{name}".encode()).digest()[:8], "big"))
    out: list[str] = []
    seen: set[str] = set()  # beside the list: a membership test per draw in constant time (a list's was O(n))
    wanted = min(n, len(firsts) * len(lasts) ** (len(parts) - 1))  # no more draws once every name is drawn
    for _ in range(MAX_DRAWS * n):
        middle = [rng.choice(lasts) for _ in parts[1:-1]]  # middle parts: further surnames of that origin
        variant = " ".join([rng.choice(firsts), *middle, *([rng.choice(lasts)] if len(parts) > 1 else [])])
        if variant not in seen:
            seen.add(variant)
            out.append(variant)
        if len(out) == wanted:
            break
    return out


def lookalike_names(name: str, n: int, scheme: str = "reversed") -> tuple[list[str], str]:
    """(S(h), the scheme actually used). ``same_origin`` falls back to ``reversed`` for a name of unknown origin
    or when its origin's lists cannot give n distinct names."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown look-alike scheme {scheme!r}; use one of {', '.join(SCHEMES)}")
    if scheme == "same_origin":
        origin = name_origin(name)
        if origin is not None:
            names = same_origin_names(name, n, origin)
            if len(names) == n:
                return names, "same_origin"
    return similar_names(name, n), "reversed"


def lookalikes_for(name: str, options: Mapping[str, Any]) -> tuple[list[str], str]:
    """:func:`lookalike_names` with a subject audit's options (``similar_names``, ``lookalikes``)."""
    return lookalike_names(name, int(options.get("similar_names", 2)), str(options.get("lookalikes", "reversed")))
