"""Out-of-pool values for the null cohort: real values of a property's kind that are *not* among its counterfactual
pool, so that a true value outside the pool (a small town among capitals) is judged against null facts whose truth
is outside the pool too.

A real person's out-of-pool value differs from the pool in form: a town rather than a capital, a rare language, an
occupation the catalog does not list. Its calibrated score is an outlier in both directions, so a null of pool
values does not cover it. The reservoirs below are read from Faker's data modules (MIT; never its random generator,
so they are the same on every machine for a given Faker version), minus the property's pool (compared by meaning):

- ``place`` (birthplace, place of death, residence): real towns with their country (Faker's ``geo`` list, about
  960 places in 130 countries). A person gets a town of their name's origin country, as a real person's birthplace
  fits their name (else a town of the origin's naming region, else any town);
- ``country``: Faker's country names and former states (:data:`FORMER_STATES`: many real citizenships are of a
  state that no longer exists); ``language``: Faker's ISO 639 language names; ``occupation``: its job titles
  (lower case, without qualifiers after a comma or in brackets, at most three words).

Values with a comma or a bracket ("Sotho, Southern") are left out: no real value is written so.

Other kinds (dates, quantities: generated pools hold every value of their form; closed lists such as sex or gender)
have no reservoir, and a fact outside their pool stays `uncalibrated`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import cache

from faker.providers.address.en_US import Provider as _Address
from faker.providers.geo import Provider as _Geo
from faker.providers.job import Provider as _Job
from faker.providers.person import Provider as _Person

from core.catalog import Property
from core.catalog.values import value_key
from core.names.origins import BY_LOCALE, REGIONS

RESERVOIR = "faker-out-of-pool-1"  # bump when a reservoir or the drawing changes (it enters the null's key)
KINDS = ("place", "country", "language", "occupation")
MAX_OCCUPATION_WORDS = 3

# ISO 3166 codes of the origins' countries (core.names.origins), to give a person a town of their own country.
COUNTRY_CODES = {
    "Algeria": "DZ",
    "Argentina": "AR",
    "Austria": "AT",
    "Belgium": "BE",
    "Brazil": "BR",
    "Bulgaria": "BG",
    "Canada": "CA",
    "Chile": "CL",
    "Colombia": "CO",
    "Croatia": "HR",
    "Czech Republic": "CZ",
    "Denmark": "DK",
    "Estonia": "EE",
    "Finland": "FI",
    "France": "FR",
    "Germany": "DE",
    "Ghana": "GH",
    "Hungary": "HU",
    "India": "IN",
    "Indonesia": "ID",
    "Ireland": "IE",
    "Italy": "IT",
    "Japan": "JP",
    "Kenya": "KE",
    "Latvia": "LV",
    "Mexico": "MX",
    "Netherlands": "NL",
    "New Zealand": "NZ",
    "Nigeria": "NG",
    "Norway": "NO",
    "People's Republic of China": "CN",
    "Poland": "PL",
    "Portugal": "PT",
    "Romania": "RO",
    "Russia": "RU",
    "Slovenia": "SI",
    "South Africa": "ZA",
    "Spain": "ES",
    "Sweden": "SE",
    "Switzerland": "CH",
    "Taiwan": "TW",
    "Turkey": "TR",
    "Ukraine": "UA",
    "United Kingdom": "GB",
    "United States": "US",
    "Vietnam": "VN",
}


FORMER_STATES = (
    "Soviet Union",
    "Russian Empire",
    "Kingdom of Prussia",
    "German Empire",
    "Weimar Republic",
    "East Germany",
    "West Germany",
    "Austria-Hungary",
    "Austrian Empire",
    "Ottoman Empire",
    "Yugoslavia",
    "Czechoslovakia",
    "Kingdom of Italy",
    "Kingdom of Hungary",
    "Kingdom of Bavaria",
    "Kingdom of Saxony",
    "Grand Duchy of Finland",
    "Second Polish Republic",
    "Republic of Venice",
    "Papal States",
    "Kingdom of the Two Sicilies",
    "Kingdom of Sardinia",
    "Qing dynasty",
    "Empire of Japan",
    "British Raj",
    "Kingdom of Great Britain",
    "Kingdom of Ireland",
    "Kingdom of Scotland",
    "Kingdom of England",
    "Dutch Republic",
    "Holy Roman Empire",
    "Mandatory Palestine",
    "Rhodesia",
    "Serbia and Montenegro",
    "Tsardom of Russia",
    "Confederate States of America",
    "Kingdom of Hawaii",
    "Kingdom of Bohemia",
    "Kingdom of Portugal",
    "Kingdom of France",
    "Second French Empire",
    "Kingdom of Yugoslavia",
    "Kingdom of Romania",
    "Kingdom of Greece",
    "Kingdom of Egypt",
    "Union of South Africa",
)


def _occupation(title: str) -> str | None:
    head = title.split(",")[0].split("(")[0].strip().lower()
    return head if head and len(head.split()) <= MAX_OCCUPATION_WORDS else None


def _raw(kind: str) -> tuple[str, ...]:
    if kind == "place":
        return tuple(p[2] for p in _Geo.land_coords)
    if kind == "country":
        return (*_Address.countries, *FORMER_STATES)
    if kind == "language":
        return tuple(_Person.language_names)
    if kind == "occupation":
        return tuple(o for o in (_occupation(t) for t in _Job.jobs) if o)
    raise KeyError(kind)


def has_reservoir(prop: Property) -> bool:
    """Whether null facts outside ``prop``'s pool can be drawn (a listed pool of a kind with a reservoir)."""
    return prop.pool_generator is None and prop.value_type in KINDS


@cache
def _reservoir(value_type: str, datatype: str, pool_keys: frozenset) -> tuple[str, ...]:
    seen, out = set(pool_keys), []
    for v in _raw(value_type):
        if "," in v or "(" in v:
            continue
        key = value_key(datatype, value_type, v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return tuple(out)


def reservoir(prop: Property) -> tuple[str, ...]:
    """The values of ``prop``'s kind outside its pool (distinct by meaning, in Faker's order)."""
    if not has_reservoir(prop):
        return ()
    pool = frozenset(prop.value_key(v) for v in prop.pool)
    return _reservoir(prop.value_type, prop.datatype, pool)


@cache
def _places_by_country() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for p in _Geo.land_coords:
        out.setdefault(p[3], []).append(p[2])
    return {k: tuple(v) for k, v in out.items()}


def _fitting_places(values: Sequence[str], locale: str) -> list[str]:
    """The out-of-pool towns of ``locale``'s country, else of its naming region's countries, else every one."""
    allowed = set(values)
    by_country = _places_by_country()
    origin = BY_LOCALE.get(locale)
    if origin is not None:
        own = [v for v in by_country.get(COUNTRY_CODES.get(origin.country, ""), ()) if v in allowed]
        if own:
            return own
        region = REGIONS.get(locale)
        codes = {COUNTRY_CODES.get(o.country) for o in BY_LOCALE.values() if region and REGIONS.get(o.locale) == region}
        near = [v for c in sorted(c for c in codes if c) for v in by_country.get(c, ()) if v in allowed]
        if near:
            return near
    return list(values)


def out_of_pool_values(prop: Property, locale: str, key: str, k: int) -> list[str]:
    """``k`` distinct out-of-pool values for one fictitious person (``key`` seeds the draw: cohort seed, person,
    property); places fit the person's name origin (``locale``). Empty where ``prop`` has no reservoir."""
    values = reservoir(prop)
    if not values or k < 1:
        return []
    choices = _fitting_places(values, locale) if prop.value_type == "place" else list(values)
    rng = random.Random(f"out-of-pool:{RESERVOIR}:{key}")
    return rng.sample(choices, min(k, len(choices)))
