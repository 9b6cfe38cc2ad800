"""A small Wikidata JSON dump fragment in the real layout, written by the tests themselves."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

from tests.app.wikidata.recorded import DOUGLAS_ADAMS, VALUE_LABELS, entity, item_snak, labels

OCCUPATIONS = {"Q901": "scientist", "Q33999": "actor", "Q82955": "politician"}
COUNTRIES = {"Q145": "United Kingdom", "Q30": "United States"}


def property_entity(pid: str, label: str, datatype: str) -> dict:
    return {
        "type": "property",
        "id": pid,
        "datatype": datatype,
        "labels": labels(label),
        "descriptions": labels("occupation of a person"),
        "aliases": {"en": [{"language": "en", "value": "job"}]},
        "claims": {},
    }


def fictitious_humans(n: int, with_country_every: int = 3) -> list[dict]:
    """n humans; each has an occupation, every ``with_country_every``-th also a country of citizenship."""
    occupations, countries = sorted(OCCUPATIONS), sorted(COUNTRIES)
    out = []
    for i in range(n):
        claims = {"P31": [item_snak("P31", "Q5")], "P106": [item_snak("P106", occupations[i % 3])]}
        if i % with_country_every == 0:
            claims["P27"] = [item_snak("P27", countries[i % 2])]
        out.append(entity(f"Q{1_000_000 + i}", f"Person {i}", claims))
    return out


def dump_lines(entities: list[dict], bad: dict[int, str] | None = None) -> list[str]:
    """The dump's layout: '[' / one entity per line ending in ',' (not the last) / ']'."""
    body = [json.dumps(e, ensure_ascii=False) for e in entities]
    for index, text in (bad or {}).items():
        body.insert(index, text)
    lines = ["["] + [line + "," for line in body[:-1]] + [body[-1], "]"]
    return lines


def write_dump(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    elif path.name.endswith(".bz2"):
        path.write_bytes(bz2.compress(data))
    else:
        path.write_bytes(data)
    return path


def fragment() -> list[dict]:
    items = [entity(q, label, {"P31": [item_snak("P31", "Q28640")]}) for q, label in OCCUPATIONS.items()]
    items += [entity(q, label, {"P31": [item_snak("P31", "Q6256")]}) for q, label in COUNTRIES.items()]
    items += [entity(q, label, {}) for q, label in VALUE_LABELS.items() if q not in COUNTRIES]  # Douglas Adams' values
    unlabelled = entity("Q2000000", None, {"P31": [item_snak("P31", "Q5")]})
    return [
        property_entity("P106", "occupation", "wikibase-item"),
        DOUGLAS_ADAMS,
        *fictitious_humans(120),
        unlabelled,
        *items,
    ]
