"""Hand-written entities in Wikidata's JSON serialization (as served by wbgetentities and the JSON dumps)."""

from __future__ import annotations


def item_snak(pid: str, qid: str, rank: str = "normal") -> dict:
    return {
        "mainsnak": {
            "snaktype": "value",
            "property": pid,
            "datavalue": {
                "value": {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid},
                "type": "wikibase-entityid",
            },
            "datatype": "wikibase-item",
        },
        "type": "statement",
        "id": f"X${pid}-{qid}",
        "rank": rank,
    }


def time_snak(pid: str, time: str, precision: int = 11) -> dict:
    value = {
        "time": time,
        "timezone": 0,
        "before": 0,
        "after": 0,
        "precision": precision,
        "calendarmodel": "http://www.wikidata.org/entity/Q1985727",
    }
    return {
        "mainsnak": {
            "snaktype": "value",
            "property": pid,
            "datavalue": {"value": value, "type": "time"},
            "datatype": "time",
        },
        "type": "statement",
        "rank": "normal",
    }


def quantity_snak(pid: str, amount: str, unit_qid: str) -> dict:
    value = {"amount": amount, "unit": f"http://www.wikidata.org/entity/{unit_qid}"}
    return {
        "mainsnak": {
            "snaktype": "value",
            "property": pid,
            "datavalue": {"value": value, "type": "quantity"},
            "datatype": "quantity",
        },
        "type": "statement",
        "rank": "normal",
    }


def novalue_snak(pid: str) -> dict:
    return {
        "mainsnak": {"snaktype": "novalue", "property": pid, "datatype": "wikibase-item"},
        "type": "statement",
        "rank": "normal",
    }


def string_snak(pid: str, text: str) -> dict:
    return {
        "mainsnak": {
            "snaktype": "value",
            "property": pid,
            "datavalue": {"value": text, "type": "string"},
            "datatype": "string",
        },
        "type": "statement",
        "rank": "normal",
    }


def labels(text: str, lang: str = "en") -> dict:
    return {lang: {"language": lang, "value": text}}


def entity(qid: str, label: str | None, claims: dict[str, list[dict]], lang: str = "en") -> dict:
    out = {
        "type": "item",
        "id": qid,
        "labels": labels(label, lang) if label else {},
        "descriptions": {},
        "aliases": {},
        "claims": claims,
        "sitelinks": {},
    }
    return out


DOUGLAS_ADAMS = entity(
    "Q42",
    "Douglas Adams",
    {
        "P31": [item_snak("P31", "Q5")],
        "P21": [item_snak("P21", "Q6581097")],
        "P27": [item_snak("P27", "Q145")],
        "P19": [item_snak("P19", "Q350")],
        "P106": [item_snak("P106", "Q6625963"), item_snak("P106", "Q28389"), item_snak("P106", "Q36180", "deprecated")],
        "P1412": [item_snak("P1412", "Q1860")],
        "P569": [time_snak("P569", "+1952-03-11T00:00:00Z")],
        "P570": [time_snak("P570", "+2001-05-11T00:00:00Z")],
        "P2048": [quantity_snak("P2048", "+1.96", "Q11573")],
        "P26": [novalue_snak("P26")],
        "P69": [item_snak("P69", "Q691283")],  # an item without an English label in this recording
        "P18": [string_snak("P18", "Douglas adams portrait cropped.jpg")],  # not a catalog property
    },
)

BERLIN = entity("Q64", "Berlin", {"P31": [item_snak("P31", "Q515")], "P17": [item_snak("P17", "Q183")]})

VALUE_LABELS = {
    "Q5": "human",
    "Q6581097": "male",
    "Q145": "United Kingdom",
    "Q350": "Cambridge",
    "Q6625963": "novelist",
    "Q28389": "screenwriter",
    "Q36180": "writer",
    "Q1860": "English",
}


def label_entities(ids: list[str]) -> dict[str, dict]:
    out = {}
    for qid in ids:
        if qid in VALUE_LABELS:
            out[qid] = {"type": "item", "id": qid, "labels": labels(VALUE_LABELS[qid])}
        elif qid == "Q691283":
            out[qid] = {"type": "item", "id": qid, "labels": labels("St John's College", "de")}
        else:
            out[qid] = {"id": qid, "missing": ""}
    return out
