"""What a null distribution must match: the configuration of a subject audit that changes what chance (and
inference) produce — per property, the templates probed, the counterfactual count and pool, α, the look-alike
names, near-duplicate merging — hashed into a key. The model is matched by its fingerprint beside the key.

The subject audit's seed (which counterfactuals are drawn) and contextualized canaries (they do not enter share,
strict or lenient) are not part of it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.settings import Settings
from app.wikidata.repository import latest_pool
from core import defaults
from core.catalog import load_catalog
from core.measures import answers
from core.measures.null import STATISTIC
from core.names.fictitious import GENERATOR, NAME_HINTED, roster_size
from core.names.lookalikes import READER, READER_BEFORE
from core.names.out_of_pool import RESERVOIR, has_reservoir

METHODS = ("auto", "full", "pseudo")
# Out-of-pool null facts per fictitious person: a full null's person has one (their own, fitting their name where
# the kind allows); a pseudo null has few people (each gives a null fact per candidate), so each draws several.
OUT_OF_POOL_PER_PERSON = {"full": 1, "pseudo": 10}


def template_texts(pid: str, options: Mapping[str, Any]) -> list[str]:
    """The templates a subject audit probes for ``pid`` (baseline + ``paraphrases``; all when null), as the
    subject job chooses them."""
    prop = load_catalog().get(pid)
    paraphrases = options.get("paraphrases")
    n = len(prop.templates) if paraphrases is None else min(len(prop.templates), 1 + int(paraphrases))
    return list(prop.templates[:n])


def effective_pool(session: Session, pid: str, options: Mapping[str, Any]) -> list[str]:
    """The counterfactual pool the subject job draws from (the dump-built one with ``pool: imported``)."""
    if options.get("pool") == "imported":
        values = latest_pool(session, pid)
        if values:
            return values
    return list(load_catalog().get(pid).pool)


def pool_hash(pool: Sequence[str]) -> str:
    """What a null's configuration records of the counterfactual pool it was submitted with."""
    return hashlib.sha256("\n".join(pool).encode()).hexdigest()[:16]


def resolve_method(method: str, pid: str, options: Mapping[str, Any]) -> str:
    """``auto``: full null facts where the name hints at the value (citizenship, birthplace, language, gender,
    name parts) or where near-duplicates are merged against pool values (pseudo-truths ignore merges); the
    pseudo-truth shortcut elsewhere."""
    if method != "auto":
        return method
    merges_pool = bool(options.get("near_duplicates", True)) and options.get("near_duplicate_scope") == "all"
    return "full" if pid in NAME_HINTED or merges_pool else "pseudo"


def null_config(
    pid: str,
    options: Mapping[str, Any],
    lookalikes: str,
    pool: Sequence[str],
    method: str,
    reader: str = READER,
) -> dict:
    """The configuration a null for ``pid`` must share with the subject audit (JSON-ready). ``reader``: the
    name-origin reader the audit's same-origin look-alikes came from (:func:`subject_reader`); the null's own
    look-alikes are always read by today's (:data:`core.names.lookalikes.READER`)."""
    config = {
        "property": pid,
        "templates": template_texts(pid, options),
        "counterfactuals": int(options.get("counterfactuals", 100)),
        "pool": str(options.get("pool", "catalog")),
        "pool_hash": pool_hash(pool),
        "alpha": float(options.get("alpha", 1.0)),
        "similar_names": int(options.get("similar_names", 2)),
        "lookalikes": lookalikes,
        "lookalike_reader": reader if lookalikes == "same_origin" else None,
        "near_duplicates": bool(options.get("near_duplicates", True)),
        "near_duplicate_scope": str(options.get("near_duplicate_scope", "label_variants")),
        "near_duplicate_threshold": float(options.get("near_duplicate_threshold", 0.75)),
        "method": method,
        "generator": GENERATOR,
        "statistic": STATISTIC,
        "out_of_pool": RESERVOIR if has_reservoir(load_catalog().get(pid)) else None,
    }
    return config | generation_config(pid, options)


def generation_config(pid: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """What a null of mode ``generation`` adds to its key (the mode, how it asks, its statistic): a scoring null never
    judges a generation statistic, nor the reverse. Nothing in mode ``scoring``, so its keys stay as they were."""
    if options.get("mode", "scoring") != "generation":
        return {}
    asked = dict(options.get("generation") or {})
    n = int(asked.get("templates", defaults.GENERATION_TEMPLATES))
    return {
        "mode": "generation",
        "templates": template_texts(
            pid, {"paraphrases": n - 1}
        ),  # the templates asked (options.paraphrases: scoring's)
        "generation": {
            "samples": int(asked.get("samples", defaults.GENERATION_SAMPLES)),
            "temperature": float(asked.get("temperature", defaults.GENERATION_TEMPERATURE)),
            "max_tokens": int(asked.get("max_tokens", defaults.GENERATION_MAX_TOKENS)),
            "form": str(asked.get("form", defaults.GENERATION_FORM)),
        },
        "statistic": answers.STATISTIC,
    }


def is_generation(config: Mapping[str, Any] | None) -> bool:
    """Whether a null's (or an audit's options') configuration is of mode ``generation``."""
    return (config or {}).get("mode") == "generation"


def config_key(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def people_needed(
    config: Mapping[str, Any],
    pool_size: int,
    settings: Settings,
    facts: int | None = None,
    min_people: int | None = None,
) -> int:
    """K: a full null gives one null fact per person, so K = the wanted null facts per property; with
    pseudo-truths each person gives one per candidate, so K = max(min_people, ⌈facts / candidates⌉). At most
    ``null_max_people`` and the hand-written roster's people (core.names.fictitious.roster_size)."""
    wanted = facts or settings.null_facts_per_property
    most = min(settings.null_max_people, roster_size())
    if config["method"] == "full":
        return min(wanted, most)
    candidates = min(config["counterfactuals"], max(pool_size - 1, 0)) + 1
    floor = min_people or settings.null_min_people
    return min(max(floor, math.ceil(wanted / candidates)), most)


def out_of_pool_per_person(config: Mapping[str, Any]) -> int:
    """Out-of-pool truths each fictitious person adds to a null (0 where the property has no reservoir)."""
    return OUT_OF_POOL_PER_PERSON[str(config["method"])] if config.get("out_of_pool") else 0


def sentences_per_person(config: Mapping[str, Any], pool_size: int) -> int:
    """Sentences one fictitious person costs a null for one property: templates x candidates (truth, its
    out-of-pool truths, drawn counterfactuals shared by them) x [subject, generic subject unless it cancels (α = 1),
    look-alikes]. The unit of a null's progress (and its ETA before it has run), known without drawing anyone's
    counterfactuals."""
    if is_generation(config):  # answers sampled: every template (or the question) asked K times
        prompts = 1 if config["generation"]["form"] == "chat" else len(config["templates"])
        return prompts * int(config["generation"]["samples"])
    candidates = 1 + out_of_pool_per_person(config) + min(int(config["counterfactuals"]), max(pool_size - 1, 0))
    generic = 0 if float(config["alpha"]) == 1.0 else 1  # at α = 1 the generic subject cancels and is not scored
    return len(config["templates"]) * candidates * (1 + generic + int(config["similar_names"]))


def subject_lookalikes(summary: Mapping[str, Any] | None, options: Mapping[str, Any]) -> str:
    """The look-alike scheme a finished subject audit used (same_origin falls back to reversed for a name of
    unknown origin; audits from before look-alike schemes used reversed letters)."""
    return str((summary or {}).get("lookalikes") or options.get("lookalikes") or "reversed")


def subject_reader(summary: Mapping[str, Any] | None) -> str:
    """The name-origin reader a finished subject audit drew its same-origin look-alikes with (audits from before it
    was recorded: :data:`core.names.lookalikes.READER_BEFORE`)."""
    return str((summary or {}).get("lookalike_reader") or READER_BEFORE)


def subject_null_key(session: Session, audit: Any, pid: str) -> str:
    """The configuration key of the null a finished subject audit's ``pid`` fact is judged against (the calibrator's
    and the evidence record's: one definition)."""
    options = audit.options or {}
    lookalikes = subject_lookalikes(audit.summary, options)
    pool = effective_pool(session, pid, options)
    method = resolve_method("auto", pid, options)
    return config_key(null_config(pid, options, lookalikes, pool, method, subject_reader(audit.summary)))


def subject_fingerprint(summary: Mapping[str, Any] | None) -> str | None:
    return ((summary or {}).get("scoring") or {}).get("fingerprint")
