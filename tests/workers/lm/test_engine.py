"""The engine's NLLs must equal whole-sentence scoring (|diff| <= 1e-3 nats, fp32) on every sentence shape."""

from __future__ import annotations

import inspect

import pytest
import torch

from workers.lm.engine import Engine
from workers.lm.hf import HFScorer

TOLERANCE = 1e-3
SUBJECTS = ["Barack Obama", "Nilrab Omaba", "Barack Abamo", "This person", "Zbigniew Ølstad-Kürzinger", "Xi"]
VALUES = ["lawyer", "software engineer", "politician and community organizer", "X", "Ølstad-Kürzinger", "1961"]


def workload(subjects: list[str] = SUBJECTS, values: list[str] = VALUES) -> list[tuple[str, str]]:
    """Value at the end, value mid-sentence, odd names, multi-token values, empty prefix, a prefix that cuts a word
    (its tokens are not a prefix of the sentence's), duplicates and an empty continuation."""
    pairs: list[tuple[str, str]] = []
    for subject in subjects:
        for value in values:
            pairs.append((f"{subject}'s occupation is", f" {value}."))
            pairs.append((f"{subject} worked as a", f" {value} for many years before retiring."))
            pairs.append(("", f"{value} is what {subject} does for a living."))
    pairs += [
        ("Barack Ob", "ama's occupation is lawyer."),
        ("The capital of Fra", "nce is Paris."),
        ("Barack Obama's occupation is", " lawyer."),  # a duplicate of a sentence above
        ("Barack Obama's occupation is lawyer.", ""),  # the same sentence again, all of it as prefix
        ("Water", "\n\n  boils  at 100 °C!"),
    ]
    return pairs


_REFERENCE: dict[tuple[str, str], float] = {}


def reference_nll(scorer: HFScorer, sentence: str) -> float:
    """Independent of the engine and of workers.lm.whole: one sentence, one plain forward, full log-softmax."""
    if (scorer.fingerprint, sentence) in _REFERENCE:
        return _REFERENCE[scorer.fingerprint, sentence]
    ids = [scorer.document_start_id, *scorer.tokenizer(sentence, add_special_tokens=False)["input_ids"]]
    with torch.inference_mode():
        logits = scorer.model(torch.tensor([ids], device=scorer.device)).logits[0].float()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    value = float(-logp.gather(1, torch.tensor(ids[1:], device=scorer.device)[:, None]).sum())
    _REFERENCE[scorer.fingerprint, sentence] = value
    return value


def assert_engine_exact(scorer: HFScorer, pairs: list[tuple[str, str]], mode: str) -> None:
    scorer.engine = Engine(scorer.model, scorer.device, scorer.batch_tokens, mode)  # type: ignore[arg-type]
    fast = scorer.score(pairs)
    reference = [reference_nll(scorer, p + c) for p, c in pairs]
    diffs = [abs(a - b) for a, b in zip(fast, reference, strict=True)]
    worst = max(range(len(pairs)), key=lambda i: diffs[i])
    assert diffs[worst] <= TOLERANCE, (
        f"{scorer.name} ({mode}): engine {fast[worst]:.6f} vs whole sentence {reference[worst]:.6f} "
        f"for pair #{worst} {pairs[worst]!r}"
    )
    assert len({round(x, 2) for x in fast}) > len(pairs) // 3, "NLLs barely vary: the check would be vacuous"


@pytest.mark.parametrize("mode", ["expand", "packed"])
def test_engine_matches_whole_sentence_on_tiny_model(tiny: HFScorer, mode: str) -> None:
    assert_engine_exact(tiny, workload(), mode)


@pytest.mark.parametrize("keep", ["mask", "columns", "all"])
def test_every_way_of_selecting_logits_gives_the_same_values(tiny: HFScorer, keep: str, monkeypatch) -> None:
    """Older transformers (a GPU machine had 5.17) take no 2-D mask in ``logits_to_keep``: the engine and the
    whole-sentence path then select positions another way (workers.lm.engine.keep_mode), with the same result."""
    import workers.lm.engine as engine

    assert engine.keep_mode(type(tiny.model)) == "mask", "this transformers takes a mask: the default path"
    monkeypatch.setattr(engine, "keep_mode", lambda model_type: keep)
    for mode in ("expand", "packed"):
        assert_engine_exact(tiny, workload(), mode)
    pairs = workload()[:40]
    whole = tiny.score_sentences([p + c for p, c in pairs])
    worst = max(abs(a - reference_nll(tiny, p + c)) for a, (p, c) in zip(whole, pairs, strict=True))
    assert worst <= TOLERANCE, f"whole-sentence scoring with keep={keep}: {worst:.2e} nats off"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["expand", "packed"])
def test_engine_matches_whole_sentence_on_smollm2(smollm2: HFScorer, mode: str) -> None:
    assert smollm2.document_start == "<|endoftext|>"
    # a smaller workload than the tiny model's: every shape is still there, at 1/4 of the cost
    pairs = workload(["Nilrab Omaba", "Zbigniew Ølstad-Kürzinger"], ["lawyer", "politician and community organizer"])
    assert_engine_exact(smollm2, pairs, mode)


def test_engine_matches_whole_sentence_on_groundtruth_model() -> None:
    from workers.lm import load_scorer

    scorer = load_scorer("groundtruth-tiny")
    assert isinstance(scorer, HFScorer)
    assert_engine_exact(scorer, workload(), "expand")


def test_split_point_never_changes_the_value(tiny: HFScorer) -> None:
    sentence = "Zbigniew Ølstad-Kürzinger's occupation is software engineer."
    splits = [(sentence[:k], sentence[k:]) for k in range(0, len(sentence) + 1, 3)]
    values = tiny.score(splits)
    assert max(values) - min(values) <= TOLERANCE, f"NLL depends on the split point: {min(values)}..{max(values)}"


def test_batch_composition_never_changes_the_value(tiny: HFScorer) -> None:
    pairs = workload()
    alone = [tiny.score([pair])[0] for pair in pairs[::7]]
    together = tiny.score(pairs)[::7]
    worst = max(abs(a - b) for a, b in zip(alone, together, strict=True))
    assert worst <= TOLERANCE, f"scoring in a batch moved an NLL by {worst}"


def test_small_memory_budget_gives_the_same_values(tiny_dir) -> None:
    from app.settings import Settings
    from workers.lm import load_scorer

    pairs = workload()
    roomy = load_scorer(f"hf:{tiny_dir}")
    tight = load_scorer(f"hf:{tiny_dir}", Settings(score_batch_tokens=48))
    tight.engine.max_rows = 48  # force many small chunks and batches
    a, b = roomy.score(pairs), tight.score(pairs)
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) <= TOLERANCE


def test_the_kv_cache_goes_by_the_keyword_the_forward_takes(tiny: HFScorer, recwarn) -> None:
    """transformers 5.24 renamed ``past_key_values`` to ``cache`` and warns on the old name; a model whose forward
    still takes the old name gets it."""
    from workers.lm.engine import _cache_keyword, returned_cache, with_cache

    class OldForward(torch.nn.Module):
        def forward(self, input_ids=None, past_key_values=None, use_cache=None):  # noqa: ANN001, ANN202
            return {"past_key_values": past_key_values}

    assert _cache_keyword(OldForward) == "past_key_values"
    model = tiny.model
    keyword = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
    assert with_cache(model, None) == {keyword: None}
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        nxt = model(input_ids=torch.tensor([[4]]), use_cache=True, **with_cache(model, returned_cache(out)))
    assert returned_cache(nxt) is not None
    assert not [w for w in recwarn if "past_key_values" in str(w.message)], [str(w.message) for w in recwarn]


@pytest.mark.parametrize("vocab", [400, 1024, 49_152])
def test_the_softmax_block_never_changes_a_value(vocab: int, monkeypatch) -> None:
    """pick_nll normalises a cache-sized block of rows at a time (hundreds for a small vocabulary, 8 for
    smollm2-135m's); the values are those of 8-row blocks bit for bit, for rows asked in any order and twice."""
    from workers.lm import engine

    generator = torch.Generator().manual_seed(vocab)
    logits = torch.randn(300, vocab, generator=generator) * 6
    rows = torch.cat([torch.randperm(300, generator=generator)[:200], torch.tensor([5, 5, 299])])
    targets = torch.randint(0, vocab, (len(rows),), generator=generator)
    wide = engine.pick_nll(logits, rows, targets)
    monkeypatch.setattr(engine, "SOFTMAX_BLOCK_BYTES", 0)  # SOFTMAX_ROWS rows per block
    assert torch.equal(wide, engine.pick_nll(logits, rows, targets))
    expected = -torch.log_softmax(logits[rows], dim=-1)[torch.arange(len(rows)), targets].double()
    assert torch.allclose(wide, expected, rtol=0, atol=1e-5)


def test_plain_ids_are_the_tokenizers_own(tiny: HFScorer) -> None:
    """The Rust backend is asked directly only while it would give what the wrapper gives: a backend left truncating
    (or padding) by someone else's call is not trusted, and special tokens written in the text parse alike."""
    from workers.lm.base import plain_ids

    texts = [p + c for p, c in workload()] + ["<s> inside </s> a text", ""]
    expected = [list(ids) for ids in tiny.tokenizer(texts, add_special_tokens=False)["input_ids"]]
    assert plain_ids(tiny.tokenizer, texts) == expected
    backend = tiny.tokenizer.backend_tokenizer
    backend.enable_truncation(3)
    try:
        assert plain_ids(tiny.tokenizer, texts) == expected
    finally:
        backend.no_truncation()
    backend.enable_padding(length=64)
    try:
        assert plain_ids(tiny.tokenizer, texts) == expected
    finally:
        backend.no_padding()
    assert plain_ids(tiny.tokenizer, []) == []


@pytest.mark.slow
def test_plain_ids_are_smollm2s_own(smollm2: HFScorer) -> None:
    """The default model's tokenizer (converted from its GGUF file) asked directly gives the wrapper's ids."""
    from workers.lm.base import plain_ids

    texts = [p + c for p, c in workload()] + ["<|endoftext|> inside a text", "<|im_start|>user"]
    assert plain_ids(smollm2.tokenizer, texts) == [
        list(ids) for ids in smollm2.tokenizer(texts, add_special_tokens=False)["input_ids"]
    ]
