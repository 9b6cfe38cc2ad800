"""HF backend behaviour a caller notices: bad sentences, document-start handling, greedy generation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workers.lm import EmptySentence, ModelLoadError, SentenceTooLong, load_scorer
from workers.lm.hf import HFScorer


def test_empty_sentence_is_refused_with_its_index(tiny: HFScorer) -> None:
    for bad in [("", ""), ("  ", "\n")]:
        with pytest.raises(EmptySentence) as caught:
            tiny.score([("Barack Obama's occupation is", " lawyer."), bad])
        assert caught.value.index == 1, f"wrong index for {bad!r}"


def test_too_long_sentence_names_index_and_lengths_but_not_the_text(tiny: HFScorer) -> None:
    secret = "Zbigniew Ølstad-Kürzinger " * 20
    with pytest.raises(SentenceTooLong) as caught:
        tiny.score([("a", " b"), ("c", " d"), (secret, "lawyer.")])
    error = caught.value
    assert (error.index, error.max_length) == (2, tiny.max_length)
    assert error.n_tokens > tiny.max_length
    assert "Zbigniew" not in str(error), "personal data leaked into an error message"
    # the boundary: the longest " x x x..." that fits scores, one more word is refused
    fits = "x"
    while 1 + len(tiny.encode([fits + " x"])[0]) <= tiny.max_length:
        fits += " x"
    assert tiny.score([(fits, "")])[0] > 0
    with pytest.raises(SentenceTooLong):
        tiny.score([(fits, " x")])


def test_model_without_bos_or_document_separator_is_refused(make_tiny_model, tmp_path: Path) -> None:
    make_tiny_model(tmp_path, bos=False)
    with pytest.raises(ModelLoadError, match="no BOS token"):
        load_scorer(f"hf:{tmp_path}")


def test_tokenizer_that_prepends_bos_gets_exactly_one(make_tiny_model, tmp_path: Path) -> None:
    make_tiny_model(tmp_path, auto_bos=True)
    scorer = load_scorer(f"hf:{tmp_path}")
    ids = scorer.sentence_ids(["This person's occupation is lawyer."])[0]
    assert scorer.document_start == "<s>"
    assert ids[0] == scorer.document_start_id and ids[1] != scorer.document_start_id, f"BOS doubled or missing: {ids}"


def test_model_directory_without_tokenizer_or_weights_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    weights_only, tokenizer_only = tmp_path / "weights", tmp_path / "tok"
    weights_only.mkdir()
    tokenizer_only.mkdir()
    for f in tiny_dir.iterdir():
        target = weights_only if f.name in {"config.json", "model.safetensors", "generation_config.json"} else None
        target = target or tokenizer_only
        (target / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ModelLoadError, match="tokenizer"):
        load_scorer(f"hf:{weights_only}")
    with pytest.raises(ModelLoadError, match="weights"):
        load_scorer(f"hf:{tokenizer_only}")


def greedy_reference(scorer: HFScorer, prompt: str, max_new_tokens: int) -> str:
    """Token-by-token argmax over full forwards: independent of transformers' generate()."""
    ids = [scorer.document_start_id, *scorer.tokenizer(prompt, add_special_tokens=False)["input_ids"]]
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            token = int(scorer.model(torch.tensor([ids + new])).logits[0, -1].argmax())
            if token == scorer.tokenizer.eos_token_id:
                break
            new.append(token)
    return scorer.tokenizer.decode(new, skip_special_tokens=True)


def test_generate_is_greedy_batched_and_cut_at_stop(tiny: HFScorer) -> None:
    prompts = ["Barack Obama's occupation is", "Water", "She speaks English, French and German; he speaks"]
    expected = [greedy_reference(tiny, p, 10) for p in prompts]
    assert tiny.generate(prompts, 10, stop="") == expected, "batched left-padded generate differs from greedy"
    stop = next(c for c in expected[0][2:] if c.strip())  # a character that really occurs mid-output
    cut = tiny.generate(prompts, 10, stop=stop)
    assert cut == [text.split(stop, 1)[0] for text in expected]
    assert stop not in cut[0]


def test_generate_refuses_prompts_that_leave_no_room(tiny: HFScorer) -> None:
    with pytest.raises(SentenceTooLong) as caught:
        tiny.generate(["ok", "x" * (tiny.max_length - 4)], max_new_tokens=8)
    assert caught.value.index == 1


def test_self_check_accepts_the_engine_on_a_standard_model(tiny: HFScorer) -> None:
    assert tiny.engine is not None
    assert tiny.self_check() <= 1e-3
