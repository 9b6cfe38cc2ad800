"""The null cohort: fictitious people whose names fit their facts.

Person i of a cohort draws an origin (uniformly over :data:`core.names.origins.ORIGINS`), a gender, and a first and
last name of that origin and gender; their facts fit the name as a real person's would — citizenship the origin's
country, birthplace (and place of death, residence) one of its cities, languages its language, sex or gender the
first name's, given and family name the name's own parts. Every other property gets a value drawn uniformly from
the property's pool (type-consistent, independent of the name). So a model's false-positive rate on this cohort
includes whatever it infers from a name's origin, as it would for a real person it does not know.

The names are random combinations of common names: no model can know *this* person, although a combination may
by chance be the name of some real person (a few such in a null of hundreds would only raise its rates).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from core.catalog import Catalog
from core.names.origins import GENDERS, ORIGINS, Origin, name_lists

GENERATOR = "fitting-names-1"  # bump when the generation changes (it enters the null's key)
# Properties a name carries a hint about: a person's value is chosen to fit the name, and a null fact of these
# cannot be estimated by letting other candidates stand in for the truth (the pseudo-truth shortcut).
NAME_HINTED = frozenset({"P21", "P27", "P19", "P20", "P551", "P1412", "P103", "P735", "P734"})
MAX_NAME_DRAWS = 20  # per person: redraws when a name repeats within the cohort


@dataclass(frozen=True)
class FictitiousPerson:
    index: int
    name: str
    locale: str
    gender: str
    facts: dict[str, str]  # pid -> the one true value


def _fitting_value(pid: str, origin: Origin, gender: str, first: str, last: str, rng: random.Random) -> str | None:
    if pid == "P21":
        return gender
    if pid == "P27":
        return origin.country
    if pid in ("P19", "P20", "P551"):
        return rng.choice(origin.cities)
    if pid in ("P1412", "P103"):
        return origin.language
    if pid == "P735":
        return first
    if pid == "P734":
        return last
    return None


def person(index: int, pids: Sequence[str], catalog: Catalog, seed: int, taken: set[str]) -> FictitiousPerson:
    """Person ``index`` of the cohort ``seed`` (deterministic; a name in ``taken`` is redrawn)."""
    rng = random.Random(f"null-person:{seed}:{index}")
    origin = rng.choice(ORIGINS)
    gender = rng.choice(GENDERS)
    lists = name_lists(origin.locale)
    for _ in range(MAX_NAME_DRAWS):
        first, last = rng.choice(lists.first[gender]), rng.choice(lists.last[gender])
        if f"{first} {last}" not in taken:
            break
    facts = {}
    for pid in pids:
        value = _fitting_value(pid, origin, gender, first, last, rng)
        facts[pid] = value if value is not None else rng.choice(catalog.get(pid).pool)
    return FictitiousPerson(index, f"{first} {last}", origin.locale, gender, facts)


def cohort(n: int, pids: Sequence[str], catalog: Catalog, seed: int) -> list[FictitiousPerson]:
    """n fictitious people with a fact for each of ``pids`` (distinct names where the lists allow)."""
    taken: set[str] = set()
    people = []
    for i in range(n):
        p = person(i, pids, catalog, seed, taken)
        taken.add(p.name)
        people.append(p)
    return people
