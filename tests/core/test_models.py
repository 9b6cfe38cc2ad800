"""Model names are parsed once (core.models): the API's check and the worker's resolution agree."""

from __future__ import annotations

import pytest

from core.models import ModelName, ModelNameError, parse_model_name

REGISTERED = ("groundtruth-tiny", "smollm2-135m")


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("groundtruth-tiny", ModelName("groundtruth-tiny")),
        ("hf:/models/gpt2", ModelName("hf:/models/gpt2", "/models/gpt2")),
        ("hf: openai-community/gpt2 ", ModelName("hf: openai-community/gpt2 ", "openai-community/gpt2")),
    ],
)
def test_registered_names_and_hf_targets(name: str, parsed: ModelName) -> None:
    assert parse_model_name(name, REGISTERED) == parsed
    assert parsed.registered == (parsed.hf_target is None)


@pytest.mark.parametrize(
    ("name", "words"),
    [("hf:", "must be followed"), ("hf:   ", "must be followed"), ("gpt-99", "unknown model"), ("", "unknown model")],
)
def test_names_that_name_no_model_are_refused_with_the_fix(name: str, words: str) -> None:
    with pytest.raises(ModelNameError, match=words) as caught:
        parse_model_name(name, REGISTERED)
    assert "groundtruth-tiny" in str(caught.value) or "hf:" in str(caught.value)
