"""The null cohort: fictitious people whose names fit their facts.

The people come from a roster written by hand (``null_roster.json`` beside this module: 775 invented people with
ordinary names of the 51 origins of :data:`core.names.origins.ORIGINS`, written by four writers from general
knowledge; its ``note`` says how). Person i of the cohort ``seed`` is the roster's i-th person in an order the seed
shuffles; their facts fit the name as a real person's would — citizenship the origin's country, birthplace (and
place of death, residence) one of its cities, languages its language, sex or gender the written one, given and
family name the name's own parts. Every other property gets a value drawn uniformly from the property's pool
(type-consistent, independent of the name). So a model's false-positive rate on this cohort includes whatever it
infers from a name's origin, as it would for a real person it does not know.

Why written names and not random combinations of name lists (``fitting-names-1``, Faker's lists): a real person's
name is more typical of its origin than a uniform draw from a long list, and a model infers more from it; a null of
such draws understated the false-positive rate for ordinary names on citizenship, birthplace and languages (3-6 %
at p <= 0.01 instead of 1 %, docs/measures.md "Typical names"). Judged against hand-written people, invented people
of another writer come out at the nominal rate. A cohort holds at most the roster's people
(:func:`roster_size`; callers cap at it). Any match with a real person is accidental.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from core.catalog import Catalog
from core.names.origins import BY_LOCALE, Origin

GENERATOR = "hand-written-1"  # bump when the generation changes (it enters the null's key)
ROSTER_PATH = Path(__file__).with_name("null_roster.json")


@dataclass(frozen=True)
class FictitiousPerson:
    index: int
    name: str
    locale: str
    gender: str
    facts: dict[str, str]  # pid -> the one true value
    writer: int = 0  # which of the roster's writers wrote the person


@dataclass(frozen=True)
class RosterEntry:
    name: str
    locale: str
    gender: str
    writer: int


@cache
def roster() -> tuple[RosterEntry, ...]:
    """The hand-written people (``null_roster.json``), in the file's order."""
    raw = json.loads(ROSTER_PATH.read_text(encoding="utf-8"))["people"]
    return tuple(RosterEntry(p["name"], p["locale"], p["gender"], int(p["writer"])) for p in raw)


def roster_size() -> int:
    """How many people a cohort can hold: the roster's."""
    return len(roster())


@cache
def _order(seed: int) -> tuple[int, ...]:
    """The roster's order for the cohort ``seed``."""
    return tuple(random.Random(f"null-roster:{seed}").sample(range(len(roster())), len(roster())))


Fit = Callable[[Origin, str, str, str, random.Random], str]
# Properties a name carries a hint about, each with how a person's value is chosen to fit the name (its origin, the
# gender, the given and family names; a random draw for a place): a null fact of these cannot be estimated by letting
# other candidates stand in for the truth (the pseudo-truth shortcut). One list: NAME_HINTED is its keys.
FITTING: dict[str, Fit] = {
    "P21": lambda origin, gender, first, last, rng: gender,
    "P27": lambda origin, gender, first, last, rng: origin.country,
    "P19": lambda origin, gender, first, last, rng: rng.choice(origin.cities),
    "P20": lambda origin, gender, first, last, rng: rng.choice(origin.cities),
    "P551": lambda origin, gender, first, last, rng: rng.choice(origin.cities),
    "P1412": lambda origin, gender, first, last, rng: origin.language,
    "P103": lambda origin, gender, first, last, rng: origin.language,
    "P735": lambda origin, gender, first, last, rng: first,
    "P734": lambda origin, gender, first, last, rng: last,
}
NAME_HINTED = frozenset(FITTING)


def _fitting_value(pid: str, origin: Origin, gender: str, first: str, last: str, rng: random.Random) -> str | None:
    fit = FITTING.get(pid)
    return fit(origin, gender, first, last, rng) if fit is not None else None


def _name_parts(name: str, locale: str) -> tuple[str, str]:
    """(given, family) name as written: Chinese and Vietnamese names are written family name first."""
    parts = name.split(" ")
    if locale.startswith(("zh_", "vi_")):
        return " ".join(parts[1:]), parts[0]
    return parts[0], " ".join(parts[1:])


def person(index: int, pids: Sequence[str], catalog: Catalog, seed: int) -> FictitiousPerson:
    """Person ``index`` of the cohort ``seed`` (deterministic; ``index`` < :func:`roster_size`)."""
    if not 0 <= index < roster_size():
        raise ValueError(f"a null cohort holds at most the roster's {roster_size()} people (asked for person {index})")
    entry = roster()[_order(seed)[index]]
    rng = random.Random(f"null-person:{seed}:{index}")
    origin = BY_LOCALE[entry.locale]
    first, last = _name_parts(entry.name, entry.locale)
    facts = {}
    for pid in pids:
        value = _fitting_value(pid, origin, entry.gender, first, last, rng)
        facts[pid] = value if value is not None else rng.choice(catalog.get(pid).pool)
    return FictitiousPerson(index, entry.name, origin.locale, entry.gender, facts, entry.writer)


def cohort(n: int, pids: Sequence[str], catalog: Catalog, seed: int) -> list[FictitiousPerson]:
    """The first n people of the cohort ``seed`` (distinct names), with a fact for each of ``pids``."""
    return [person(i, pids, catalog, seed) for i in range(n)]
