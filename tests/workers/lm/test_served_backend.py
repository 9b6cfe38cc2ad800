"""The served backend ("openai") against a real llama-cpp-python server on loopback serving SmolLM2-135M's GGUF:
NLLs against the in-process HF backend on the same file, greedy generation, and the load-time refusals (no prompt
log-probs, misaligned log-probs, a wrong API key), timeouts and retries through a real HTTP proxy.

Measured here (docs/engine.md, "Served models"): the served NLLs equal llama.cpp's own (llama-cpp-python in
process, the same GGUF, fresh evaluation of the same token ids) to float32 rounding. Against transformers'
de-quantized fp32 model, llama.cpp's Q4_1 kernels (8-bit activations) differ over the 48 audit-like sentences below
by at most 0.88 nats per sentence (mean 0.30; 0.036 per token), most of it on the first token (+0.28 on average: the
document start's own hidden state); the four probe sentences by at most 0.19. TOLERANCE leaves room for other CPUs.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.settings import ModelSpec, Settings, default_models
from tests.support import loopback
from tests.support.llama_server import (
    LAUNCHER,
    LLAMA_CPP_MISSING,
    SERVED_NAME,
    SKIP_REASON,
    LlamaServer,
    Proxy,
    llama_cpp_nlls,
    start_llama_server,
)
from workers.lm import ModelLoadError, SentenceTooLong, load_scorer
from workers.lm.base import PROBE_PAIRS, EmptySentence, ServerUnavailable
from workers.lm.served import ServedScorer
from workers.lm.served_client import ServedClient

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LLAMA_CPP_MISSING, reason=SKIP_REASON)]

TOLERANCE = 1.25  # nats per sentence against HF fp32 (measured max 0.88)
TOKEN_TOLERANCE = 0.06  # mean nats per token against HF fp32 (measured 0.036)
RANK_MARGIN = 1.0  # nats: a lead the two backends' noise cannot flip (measured within-group spread 0.56)
EXACT = 1e-3  # nats per sentence against llama.cpp in process (float32 sums of ~10 terms)
NAMES = ["Pablo Picasso", "This person", "Marie Curie"]
VALUES = ["Spain", "France", "Poland", "Argentina"]
TEMPLATES = [
    "{h} is a citizen of {v}.",
    "{h} was born in {v}.",
    "The country of citizenship of {h} is {v}.",
    "{h}'s nationality: {v}",
]


def audit_pairs() -> list[tuple[str, str]]:
    """Prefix / continuation pairs the way a subject audit splits them (the value starts the continuation)."""
    pairs = []
    for template in TEMPLATES:
        head, tail = template.split("{v}")
        for h in NAMES:
            pairs += [(head.format(h=h).rstrip(" "), " " + v + tail) for v in VALUES]
    return pairs


def spec_for(url: str, tokenizer: Path, **options) -> ModelSpec:
    return ModelSpec(
        backend="openai", base_url=url, served_model=SERVED_NAME, tokenizer=str(tokenizer), max_length=1024, **options
    )


def load(spec: ModelSpec, name: str = "served") -> ServedScorer:
    scorer = load_scorer(name, Settings(models={**default_models(), name: spec}))
    assert isinstance(scorer, ServedScorer)
    return scorer


@pytest.fixture(scope="module")
def served(llama_server: LlamaServer, smollm2_tokenizer_dir: Path) -> ServedScorer:
    return load(spec_for(llama_server.url, smollm2_tokenizer_dir, api_key=llama_server.api_key))


@pytest.fixture(scope="module")
def audit_nlls(served: ServedScorer) -> list[float]:
    """The served NLLs of audit_pairs(), scored once: ~0.25 CPU-s a sentence on the tests' server (~0.8 on
    llama-cpp-python's own, tests/support/llama_serve.py)."""
    return served.score(audit_pairs())


@pytest.fixture
def proxy(llama_server: LlamaServer) -> Iterator[Proxy]:
    front = Proxy(llama_server.url)
    yield front
    front.close()


def test_nlls_match_the_hf_backend_on_the_same_gguf(llama_server, smollm2, audit_nlls):
    spec = ModelSpec(
        backend="openai",
        base_url=llama_server.url,
        served_model=SERVED_NAME,
        max_length=1024,
        api_key=llama_server.api_key,
        reference="smollm2-135m",
    )
    served = load(spec)  # tokenizer from the reference; its probe NLLs checked against it at load
    assert served.reference_gap is not None and served.reference_gap <= spec.reference_tolerance
    assert served.document_start == smollm2.document_start == "<|endoftext|>"
    pairs = audit_pairs()
    mine, reference = audit_nlls, smollm2.score(pairs)
    assert served.score(pairs[:4]) == pytest.approx(mine[:4], abs=1e-4)  # the reference-checked load scores alike
    gaps = [abs(a - b) for a, b in zip(mine, reference, strict=True)]
    tokens = sum(len(ids) for ids in served._encode([p + c for p, c in pairs]))
    report = f"max {max(gaps):.3f}, mean {sum(gaps) / len(gaps):.3f} nats/sentence, {sum(gaps) / tokens:.4f}/token"
    print(f"\nserved (llama.cpp Q4_1) vs HF (fp32) over {len(pairs)} sentences: {report}")
    assert max(gaps) <= TOLERANCE, report
    assert sum(gaps) / tokens <= TOKEN_TOLERANCE, report
    # what a subject audit ranks: the best value per (template, name). Within a group the two backends' gaps spread
    # by at most 0.56 nats (measured; 11 of 12 best values agree, the twelfth is a 0.02-nat near-tie), so the best
    # value must agree wherever the HF backend leads by more than RANK_MARGIN.
    for i in range(0, len(pairs), len(VALUES)):
        group_mine, group_reference = mine[i : i + len(VALUES)], reference[i : i + len(VALUES)]
        first, second = sorted(group_reference)[:2]
        if second - first > RANK_MARGIN:
            assert group_mine.index(min(group_mine)) == group_reference.index(first), pairs[i]


def test_nlls_equal_llama_cpp_in_process(served, audit_nlls):
    theirs = llama_cpp_nlls(served._ids([p + c for p, c in audit_pairs()]))
    assert audit_nlls == pytest.approx(theirs, abs=EXACT)


def test_prefix_split_does_not_change_the_value(served):
    whole = served.score([("", p + c) for p, c in PROBE_PAIRS])
    assert served.score(list(PROBE_PAIRS)) == pytest.approx(whole, abs=1e-3)
    assert served.layout == "stripped" and served.first is not None  # llama-cpp-python nulls the first token
    assert served.batch_size == 1  # it takes one prompt per request


def test_greedy_generation_matches_the_hf_backend(served, smollm2):
    prompts = ["The capital of France is", "1, 2, 3,", "Monday, Tuesday,"]
    assert served.generate(prompts, 8) == smollm2.generate(prompts, 8)
    assert all("\n" not in text for text in served.generate(prompts, 24))


def test_sentences_are_checked_before_any_request(served, proxy):
    assert served.score([]) == [] and served.generate([], 4) == []
    with pytest.raises(EmptySentence):
        served.score([("ok", " fine"), (" ", "")])
    with pytest.raises(SentenceTooLong) as caught:
        served.score([("word " * 1100, "end")])
    assert caught.value.index == 0 and caught.value.max_length == 1023  # one position kept for the generated token


def through(proxy: Proxy, served: ServedScorer, key: str | None, *, timeout: float, retries: int) -> ServedScorer:
    """The loaded scorer, its requests sent through ``proxy`` (a copy: the module's scorer keeps its own client).
    Loading it again through the proxy would repeat the load-time checks (14 completions, 8 of them echoed prompts
    at ~0.25 CPU-s each on the server) for nothing these tests check."""
    scorer = copy.copy(served)
    scorer.client = ServedClient("served", proxy.url, key, timeout=timeout, retries=retries, concurrency=1)
    return scorer


def test_retries_on_503_then_scores(llama_server, served, proxy):
    scorer = through(proxy, served, llama_server.api_key, timeout=120, retries=3)
    proxy.fail_next, before = 2, proxy.requests
    assert scorer.score(list(PROBE_PAIRS[:1])) == pytest.approx(scorer.score(list(PROBE_PAIRS[:1])), abs=1e-4)
    assert proxy.requests - before == 4  # two refused, the retry and the second call


def test_slow_server_times_out_with_a_readable_error(llama_server, smollm2_tokenizer_dir, served, proxy):
    scorer = through(proxy, served, llama_server.api_key, timeout=120, retries=1)
    proxy.delay = 1.0  # slow but within the timeout: answers
    assert len(scorer.score(list(PROBE_PAIRS[:1]))) == 1
    # a 1 s timeout (loading itself needs the shared machine's pace) and a stalled server
    scorer = through(proxy, served, llama_server.api_key, timeout=1, retries=1)
    proxy.delay = 5.0
    started = time.monotonic()
    with pytest.raises(ServerUnavailable, match=r"did not answer /completions \(ReadTimeout\) after 2 attempt"):
        scorer.score(list(PROBE_PAIRS[:1]))
    print(f"\ngave up after {time.monotonic() - started:.1f} s (timeout 1 s, one retry)")
    with pytest.raises(ModelLoadError, match=r"did not answer /models \(ReadTimeout\)"):
        load(spec_for(proxy.url, smollm2_tokenizer_dir, api_key=llama_server.api_key, timeout=1, retries=0))


def test_server_without_prompt_logprobs_is_refused(llama_server, smollm2_tokenizer_dir, proxy):
    proxy.strip_prompt_logprobs = True  # what llama.cpp's own server does: the generated token's only
    with pytest.raises(ModelLoadError, match="returns no prompt log-probs"):
        load(spec_for(proxy.url, smollm2_tokenizer_dir, api_key=llama_server.api_key))


def test_misaligned_server_is_refused(smollm2_tokenizer_dir, tmp_path):
    """llama-cpp-python without the BOS override lists every token but pairs each with the next position's
    distribution: counts match, numbers are wrong. The alignment check catches it."""
    server = start_llama_server(tmp_path, bos_override=False)
    try:
        with pytest.raises(ModelLoadError, match=r"not aligned .*--kv_overrides tokenizer\.ggml\.bos_token_id=int:0"):
            load(spec_for(server.url, smollm2_tokenizer_dir))
    finally:
        server.stop()


def test_the_launchers_sort_changes_no_answer(llama_server, tmp_path):
    """The session's server runs through tests/support/llama_serve.py (the vocabulary sort by numpy); the peer's own
    ``python -m llama_cpp.server`` answers the same echoed completion, every token and top log-prob alike."""
    body = {"model": SERVED_NAME, "prompt": "<|endoftext|>Marie Curie was born in Warsaw.", "max_tokens": 2}
    body |= {"echo": True, "logprobs": 3, "temperature": 0}
    plain = start_llama_server(tmp_path, plain=True)
    try:
        theirs = loopback.post(f"{plain.url}/completions", json=body, timeout=120).json()["choices"]
    finally:
        plain.stop()
    headers = {"Authorization": f"Bearer {llama_server.api_key}"}
    mine = loopback.post(f"{llama_server.url}/completions", json=body, headers=headers, timeout=120).json()["choices"]
    assert mine == theirs
    tops = mine[0]["logprobs"]["top_logprobs"]  # the echoed tokens' and the generated: the 3 best of each and its own
    assert len(tops) >= 9 and all(len(top) >= 3 for top in tops[1:])
    assert llama_server.args[1] == str(LAUNCHER) or os.environ.get("MEMAUDIT_TEST_LLAMA_PLAIN") == "1"


def test_server_without_logits_all_is_refused(smollm2_tokenizer_dir, tmp_path):
    server = start_llama_server(tmp_path, logits_all=False)
    try:
        with pytest.raises(ModelLoadError, match="logits_all"):
            load(spec_for(server.url, smollm2_tokenizer_dir, retries=0))
    finally:
        server.stop()


def test_wrong_key_and_bad_specs_are_refused_readably(llama_server, smollm2_tokenizer_dir):
    wrong = "sk-wrong-" + "7" * 24
    with pytest.raises(ModelLoadError, match=r"refused the API key \(HTTP 401\)") as caught:
        load(spec_for(llama_server.url, smollm2_tokenizer_dir, api_key=wrong))
    assert wrong not in str(caught.value) and llama_server.api_key not in str(caught.value)
    with pytest.raises(ModelLoadError, match=r"serves smollm2-served, not 'other'; set served_model"):
        load(
            spec_for(llama_server.url, smollm2_tokenizer_dir, api_key=llama_server.api_key).model_copy(
                update={"served_model": "other"}
            )
        )
    with pytest.raises(ModelLoadError, match="needs base_url"):
        load(ModelSpec(backend="openai", served_model="m", tokenizer=str(smollm2_tokenizer_dir)))
    with pytest.raises(ModelLoadError, match="needs a local tokenizer"):
        load(ModelSpec(backend="openai", base_url=llama_server.url, served_model=SERVED_NAME))


def test_the_api_key_never_shows_in_reprs_or_dumps(llama_server, served):
    key = llama_server.api_key
    spec = spec_for(llama_server.url, Path("/nowhere"), api_key=key)
    settings = Settings(models={"served": spec})
    for text in (
        repr(spec),
        str(spec),
        repr(settings),
        spec.model_dump_json(),
        settings.model_dump_json(),
        repr(served.client),
        repr(vars(served)),
    ):
        assert key not in text
