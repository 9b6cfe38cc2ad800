"""The served generators against a real llama-cpp-python server on loopback (SmolLM2-135M-Instruct's GGUF behind an
API key, the served-backend tests' fixture): its ``/v1/chat/completions`` and ``/v1/completions`` give n answers per
prompt, their usage is counted, and answers are reproducible with a seed.

What this server does (llama-cpp-python 0.3): it ignores ``n`` (one choice per request; the generator asks again,
the k-th answer with seed + k), honours ``seed`` (the load-time probe finds it), and gives the generated tokens'
``top_logprobs`` on both endpoints. Its first answer to a prompt it has not just evaluated can differ from later
ones with the same seed (its prompt cache), so reproducibility is checked on the same requests in the same order
(one request at a time) after a first run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.settings import ModelSpec, Settings, default_models
from tests.support.llama_server import LLAMA_CPP_MISSING, SERVED_NAME, SKIP_REASON, LlamaServer
from workers.lm.chat import ServedGenerator, load_generator
from workers.lm.generation import Prompt

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LLAMA_CPP_MISSING, reason=SKIP_REASON)]

QUESTIONS = ["What is the capital of France?", "Name a famous painter."]
N = 3
MAX_TOKENS = 6


def generator_for(server: LlamaServer, backend: str) -> ServedGenerator:
    spec = ModelSpec(
        backend=backend,
        base_url=server.url,
        served_model=SERVED_NAME,
        api_key=server.api_key,
        timeout=60,
        retries=1,
        concurrency=1,
    )
    return load_generator(f"llama-{backend}", spec, Settings(models={**default_models(), "llama": spec}))


@pytest.fixture(scope="module")
def chat(llama_server: LlamaServer) -> Iterator[ServedGenerator]:
    generator = generator_for(llama_server, "openai-chat")
    yield generator
    generator.close()


@pytest.fixture(scope="module")
def completions(llama_server: LlamaServer) -> Iterator[ServedGenerator]:
    generator = generator_for(llama_server, "openai")
    yield generator
    generator.close()


def sample(generator: ServedGenerator, prompts: list[Prompt], seed: int, **options) -> list[list[str]]:
    rows = generator.sample(prompts, N, temperature=1.0, max_tokens=MAX_TOKENS, seed=seed, **options)
    return [[s.text for s in row] for row in rows]


def test_chat_endpoint_gives_n_answers_per_prompt_reproducibly_with_a_seed(chat):
    assert chat.seeded, "llama-cpp-python honours the request's seed"
    prompts = [Prompt(messages=({"role": "user", "content": q},)) for q in QUESTIONS]
    before = chat.usage.as_dict()
    first = sample(chat, prompts, seed=11)
    used = {k: v - before[k] for k, v in chat.usage.as_dict().items()}
    assert [len(row) for row in first] == [N, N] and all(isinstance(t, str) for row in first for t in row)
    assert any(t.strip() for row in first for t in row)
    assert chat.honours_n is False, "llama-cpp-python answers one choice whatever n asks"
    assert used["queries"] == len(QUESTIONS) * N and used["prompts"] == 2 and used["samples"] == 2 * N
    assert 0 < used["completion_tokens"] <= 2 * N * MAX_TOKENS and used["prompt_tokens"] > 0, used
    again = sample(chat, prompts, seed=11)
    assert sample(chat, prompts, seed=11) == again, "the same seed, the same requests in order: the same answers"
    assert sample(chat, prompts, seed=12) != again, "another seed gives other answers"
    assert any(len(set(row)) > 1 for row in first), "the k-th answer has its own seed: the n answers differ"


def test_chat_endpoint_gives_the_generated_tokens_top_logprobs(chat):
    [[answer]] = chat.sample(
        [Prompt(text=QUESTIONS[0])], 1, temperature=0.0, max_tokens=MAX_TOKENS, seed=0, top_logprobs=3
    )
    assert answer.top_logprobs is not None and 0 < len(answer.top_logprobs) <= MAX_TOKENS
    for step in answer.top_logprobs:
        values = list(step.values())
        assert 0 < len(step) <= 3 and values == sorted(values, reverse=True) and all(v <= 0 for v in values)


def test_completions_endpoint_without_echo_gives_n_answers_reproducibly(completions):
    assert completions.seeded
    prompts = [Prompt(text="The capital of France is"), Prompt(text="My favourite painter is")]
    before = completions.usage.as_dict()
    first = sample(completions, prompts, seed=5)
    used = {k: v - before[k] for k, v in completions.usage.as_dict().items()}
    assert [len(row) for row in first] == [N, N] and used["queries"] == 2 * N and used["samples"] == 2 * N
    assert 0 < used["completion_tokens"] <= 2 * N * MAX_TOKENS and used["prompt_tokens"] > 0, used
    again = sample(completions, prompts, seed=5)
    assert sample(completions, prompts, seed=5) == again
    greedy = completions.sample(prompts[:1], 2, temperature=0.0, max_tokens=MAX_TOKENS, seed=0, top_logprobs=2)
    assert greedy[0][0].text == greedy[0][1].text and greedy[0][0].text.strip()  # temperature 0: one answer twice
    top = greedy[0][0].top_logprobs
    assert top is not None and len(top) == MAX_TOKENS and all(len(step) <= 2 for step in top)
    assert "Paris" in greedy[0][0].text, greedy[0][0].text  # SmolLM2-135M knows this much (greedy, measured)
