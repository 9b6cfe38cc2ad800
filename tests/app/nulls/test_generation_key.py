"""A null's key says how its people were probed: a scoring null never judges a generation statistic, nor the
reverse, nor one generation configuration another's; a scoring configuration's key is what it was before generation
mode existed (stored and shipped nulls keep matching)."""

from __future__ import annotations

from app.nulls.config import config_key, null_config, sentences_per_person
from app.nulls.schemas import SubjectAuditOptions


def key(options: dict) -> str:
    dumped = SubjectAuditOptions(**options).model_dump(mode="json")
    return config_key(null_config("P106", dumped, "same_origin", ["chemist", "painter"], "pseudo"))


def test_the_key_separates_modes_and_generation_options_and_keeps_scoring_keys():
    scoring = key({})
    assert "mode" not in SubjectAuditOptions().model_dump(mode="json")  # stored as before
    generation = key({"mode": "generation"})
    assert generation != scoring
    assert key({"mode": "scoring", "generation": {"samples": 3}}) == scoring  # ignored in mode scoring
    for changed in ({"samples": 20}, {"temperature": 0.7}, {"templates": 2}, {"form": "chat"}, {"max_tokens": 8}):
        assert key({"mode": "generation", "generation": changed}) != generation, changed
    assert key({"mode": "generation", "paraphrases": 5}) == generation  # scoring's templates do not enter it
    config = null_config("P106", {"mode": "generation"}, "same_origin", ["chemist"], "pseudo")
    assert config["statistic"] == "true-share-1" and config["templates"] == config["templates"][:1]
    assert sentences_per_person(config, 2) == 10  # one template asked K = 10 times
