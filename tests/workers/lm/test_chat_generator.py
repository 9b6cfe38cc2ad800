"""The served generators (workers/lm/chat.py) against a real HTTP server on loopback that answers like an
OpenAI-compatible endpoint and fails on cue (tests/support/fake_chat.py): the requests they send, the answers they
return and count, retries (429 with Retry-After, 500, garbage, timeouts) within the model's retries and then a
readable failure naming the endpoint, the per-audit query budget, the rate limit, and the API key kept out of logs
and messages."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from app.settings import ModelSpec, Settings, default_models
from tests.support.fake_chat import FakeChat
from workers.lm.base import ModelLoadError, ServerUnavailable
from workers.lm.chat import ServedGenerator, load_generator
from workers.lm.generation import GENERATORS, BudgetExhausted, Generator, Prompt, budget
from workers.lm.registry import load_scorer

KEY = f"sk-chat-{secrets.token_hex(12)}"
SECRET_PROMPT = "Where was Ada Quillfeather born?"  # stands for personal data: never in a message or a log


def chat(text: str) -> Prompt:
    return Prompt(messages=({"role": "user", "content": text},))


@pytest.fixture
def endpoint() -> Iterator[FakeChat]:
    server = FakeChat()
    yield server
    server.stop()


def spec(url: str, backend: str = "openai-chat", **options) -> ModelSpec:
    fields = {"timeout": 1.0, "retries": 6, "concurrency": 2} | options
    return ModelSpec(backend=backend, base_url=url, served_model="assistant-1", api_key=KEY, **fields)


def load(endpoint: FakeChat, backend: str = "openai-chat", **options) -> ServedGenerator:
    model = spec(endpoint.url, backend, **options)
    generator = load_generator("remote", model, Settings(models={**default_models(), "remote": model}))
    generator.client.backoff = 0.01  # our own retries quick; a server's Retry-After is still honoured
    endpoint.requests.clear()
    return generator


def test_chat_sends_the_messages_and_returns_n_answers_per_prompt_in_order(endpoint):
    generator = load(endpoint)
    assert isinstance(generator, Generator) and generator.seeded  # the fake answers by seed: honoured
    asked = ["first question", "second question"]
    answers = generator.sample(
        [chat(q) for q in asked], 3, temperature=0.7, max_tokens=9, seed=5, top_logprobs=2, stop=["\n"]
    )
    assert [[s.text for s in row] for row in answers] == [
        [f"{q} | seed 5 | answer {k}" for k in range(3)] for q in asked
    ]
    assert answers[0][0].top_logprobs == ({"Yes": -0.1, "No": -2.5},)  # most likely first
    assert list(answers[0][0].top_logprobs[0]) == ["Yes", "No"]
    body = endpoint.requests[0]["body"]
    assert {k: body[k] for k in ("model", "n", "seed", "temperature", "max_tokens", "stop")} == {
        "model": "assistant-1",
        "n": 3,
        "seed": 5,
        "temperature": 0.7,
        "max_tokens": 9,
        "stop": ["\n"],
    }
    assert body["logprobs"] is True and body["top_logprobs"] == 2 and "prompt" not in body
    assert {r["path"] for r in endpoint.requests} == {"/v1/chat/completions"}
    assert {r["authorization"] for r in endpoint.requests} == {f"Bearer {KEY}"}
    assert generator.usage.as_dict() == {
        "queries": 2,
        "prompts": 2,
        "samples": 6,
        "completion_tokens": 12,
        "prompt_tokens": 6,
    }


def test_completions_send_text_without_echo_and_read_the_generated_tokens_logprobs(endpoint):
    generator = load(endpoint, backend="openai")
    prompts = [Prompt(text="The capital of France is"), chat("only a message")]
    answers = generator.sample(prompts, 2, temperature=1.0, max_tokens=4, seed=1, top_logprobs=2)
    assert [s.text for s in answers[0]] == [f"The capital of France is | seed 1 | answer {k}" for k in range(2)]
    assert answers[1][1].text == "only a message | seed 1 | answer 1"  # messages only: their text as the prompt
    assert answers[0][0].top_logprobs == ({"Yes": -0.1, "No": -2.5},)
    bodies = [r["body"] for r in endpoint.requests]
    assert {r["path"] for r in endpoint.requests} == {"/v1/completions"}
    assert all("echo" not in b and "messages" not in b and b["logprobs"] == 2 for b in bodies)


def test_a_chat_endpoint_given_only_text_gets_it_as_one_user_message(endpoint):
    generator = load(endpoint)
    [[answer]] = generator.sample([Prompt(text="plain text")], 1, temperature=0, max_tokens=3, seed=2**62 + 3)
    assert endpoint.requests[0]["body"]["messages"] == [{"role": "user", "content": "plain text"}]
    assert answer.text == "plain text | seed 3 | answer 0" and answer.top_logprobs is None  # a 32-bit seed is sent


def test_a_server_that_ignores_n_is_asked_once_per_answer_with_its_own_seed(endpoint):
    endpoint.ignore_n = True
    generator = load(endpoint)
    answers = generator.sample([chat("a"), chat("b")], 3, temperature=1.0, max_tokens=3, seed=10)
    assert [[s.text for s in row] for row in answers] == [
        [f"{q} | seed {10 + k} | answer 0" for k in range(3)] for q in "ab"
    ]
    assert generator.honours_n is False
    assert generator.usage.queries == len(endpoint.requests) <= 2 + 2 * 3  # a first request asking n=3, at most
    assert generator.usage.samples == 6


def test_faults_within_the_retries_are_retried_and_the_answers_are_right(endpoint):
    generator = load(endpoint)
    endpoint.faults = ["429", "500", "garbage", "no-choices", "wrong-n", "timeout"]
    started = time.monotonic()
    answers = generator.sample([chat("q")], 2, temperature=1.0, max_tokens=3, seed=3)
    assert [s.text for s in answers[0]] == ["q | seed 3 | answer 0", "q | seed 3 | answer 1"]
    assert generator.usage.queries == len(endpoint.requests) == 7  # six faults, then the answer
    assert generator.usage.completion_tokens == 4  # only the good reply's tokens
    gap = endpoint.requests[1]["time"] - endpoint.requests[0]["time"]
    assert gap >= 0.9, "the 429's Retry-After: 1 was not honoured"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("500", "HTTP 500"),
        ("429", "HTTP 429"),
        ("garbage", "a reply that is not JSON"),
        ("no-choices", "a reply without choices"),
        ("wrong-n", "3 answer(s) where 2 were asked"),
        ("timeout", "ReadTimeout"),
    ],
)
def test_persistent_faults_fail_after_the_retries_naming_the_endpoint_and_the_error(endpoint, caplog, fault, kind):
    endpoint.retry_after = "0"
    generator = load(endpoint, retries=2, concurrency=1)  # one prompt at a time: the second is never asked
    endpoint.always = fault
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ServerUnavailable) as failed:
        generator.sample([chat("q0"), chat(SECRET_PROMPT)], 2, temperature=1.0, max_tokens=3, seed=0)
    message = str(failed.value)
    assert f"{endpoint.url}" in message and "/chat/completions" in message and kind in message, message
    assert "3 attempt(s)" in message and failed.value.status == kind
    assert SECRET_PROMPT not in message and KEY not in message and "seed 0" not in message
    assert generator.usage.queries == len(endpoint.requests) == 3 and "(prompt #0)" in message
    assert KEY not in caplog.text and SECRET_PROMPT not in caplog.text


def test_a_refused_key_fails_at_once_and_at_load_names_the_setting(endpoint):
    generator = load(endpoint)
    endpoint.faults = ["401"]
    with pytest.raises(ServerUnavailable, match="refused the API key") as failed:
        generator.sample([chat("q")], 1, temperature=0, max_tokens=3, seed=0)
    assert len(endpoint.requests) == 1 and KEY not in str(failed.value)
    endpoint.faults = ["401"]
    with pytest.raises(ModelLoadError, match="MEMAUDIT_MODELS__remote__API_KEY"):
        load(endpoint)


def test_the_budget_stops_requests_past_it_retries_included(endpoint):
    generator = load(endpoint)
    endpoint.faults = ["500"]
    with budget(generator, 3) as usage:
        assert generator.sample([chat("a")], 1, temperature=0, max_tokens=3, seed=0)  # a retry: 2 queries
        with pytest.raises(BudgetExhausted, match="query budget of 3 request") as spent:
            generator.sample([chat("b"), chat("c")], 1, temperature=0, max_tokens=3, seed=0)
        assert usage.queries == 3 and len(endpoint.requests) == 3  # the fourth request was never sent
    assert "MAX_QUERIES_PER_AUDIT" in str(spent.value)
    assert generator.sample([chat("d")], 1, temperature=0, max_tokens=3, seed=0)  # outside the block: no limit
    with budget(generator, None):
        generator.sample([chat("e")], 1, temperature=0, max_tokens=3, seed=0)
    assert generator.usage.queries == 5


def test_the_budget_holds_across_threads(endpoint):
    generator = load(endpoint, concurrency=8)
    with budget(generator, 5), pytest.raises(BudgetExhausted):
        generator.sample([chat(f"q{i}") for i in range(20)], 1, temperature=0, max_tokens=3, seed=0)
    time.sleep(0.2)  # requests already in flight land
    assert len(endpoint.requests) == 5


def test_the_rate_limit_spaces_the_requests(endpoint):
    generator = load(endpoint, requests_per_second=10.0, concurrency=4)
    started = time.monotonic()
    generator.sample([chat(f"q{i}") for i in range(6)], 1, temperature=0, max_tokens=3, seed=0)
    times = sorted(r["time"] for r in endpoint.requests)
    # six requests at 10 per second: the sixth is not sent before 0.5 s after the call. Measured from the call, not
    # from the first arrival: on a loaded machine the server thread logged the first request late (a 0.25 s span)
    assert len(times) == 6 and times[-1] - started >= 0.45, (started, times)


def test_progress_is_reported_in_the_callers_thread_and_can_stop_the_work(endpoint):
    generator = load(endpoint, concurrency=1)
    seen: list[int] = []

    def progress(done: int) -> None:
        seen.append(done)
        if done == 2:
            raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError, match="cancelled"):
        generator.sample(
            [chat(f"q{i}") for i in range(10)], 1, temperature=0, max_tokens=3, seed=0, on_progress=progress
        )
    time.sleep(0.2)
    assert seen == [1, 2] and len(endpoint.requests) < 10


def test_a_chat_endpoint_is_registered_as_a_generation_only_model(endpoint):
    model = spec(endpoint.url)
    settings = Settings(models={**default_models(), "remote": model})
    assert GENERATORS["openai-chat"] == GENERATORS["openai"] == "workers.lm.chat:load_generator"
    with pytest.raises(ModelLoadError, match="chat endpoint without prompt log-probabilities: audit it with mode"):
        load_scorer("remote", settings)
    same = load(endpoint)
    other_key = load_generator("remote", model.model_copy(update={"api_key": SecretStr("sk-other")}), settings)
    other_model = load_generator("remote", model.model_copy(update={"served_model": "assistant-2"}), settings)
    assert same.fingerprint == other_key.fingerprint != other_model.fingerprint
    assert KEY not in repr(same) and KEY not in same.fingerprint
    with pytest.raises(ModelLoadError, match="needs base_url"):
        load_generator("remote", model.model_copy(update={"base_url": None}), settings)


def test_the_key_and_the_prompts_stay_out_of_logs_and_messages(endpoint, caplog):
    """Load, answers, retries and failures logged at DEBUG (httpx's and httpcore's lines included): the key and the
    prompt appear nowhere (logs, Redis and the database through the service: tests/e2e/test_chat_generation.py)."""
    caplog.set_level(logging.DEBUG)
    generator = load(endpoint)
    endpoint.faults = ["429", "500", "garbage", "timeout"]
    generator.sample([chat(SECRET_PROMPT)], 2, temperature=1.0, max_tokens=3, seed=0)
    endpoint.always = "401"
    with pytest.raises(ServerUnavailable) as refused:
        generator.sample([chat(SECRET_PROMPT)], 1, temperature=1.0, max_tokens=3, seed=0)
    with pytest.raises(ModelLoadError) as unloadable:
        load(endpoint)
    assert "model remote: served at" in caplog.text and "failed (HTTP 429)" in caplog.text  # the log was captured
    texts = [caplog.text, str(refused.value), str(unloadable.value), repr(generator), repr(generator.client)]
    for text in texts:
        assert KEY not in text and SECRET_PROMPT not in text and "Ada" not in text
    assert all(r["authorization"] == f"Bearer {KEY}" for r in endpoint.requests)  # the key was sent, all along


def test_the_jobs_asking_spends_at_most_the_models_budget_per_audit(endpoint, monkeypatch):
    """workers/jobs/asking.ask (the subject and null jobs' one call to the generator) runs inside the model's
    ``max_queries_per_audit``: past it, the job fails with the budget's reason and the request is never sent."""
    from app.nulls.schemas import GenerationOptions
    from app.settings import get_settings
    from workers.jobs.asking import Asked, ask
    from workers.jobs.common import JobError

    monkeypatch.setenv("MEMAUDIT_MODELS__remote__BACKEND", "openai-chat")
    monkeypatch.setenv("MEMAUDIT_MODELS__remote__BASE_URL", endpoint.url)
    monkeypatch.setenv("MEMAUDIT_MODELS__remote__MAX_QUERIES_PER_AUDIT", "2")
    get_settings.cache_clear()
    try:
        generator = load(endpoint)
        groups = [[Asked(None, "chat", chat(f"q{i}"), f"q{i}", []) for i in range(3)]]
        with pytest.raises(JobError, match="query budget of 2 request"):
            ask(generator, groups, GenerationOptions(samples=1), seed=0)
        assert len(endpoint.requests) == 2  # the third prompt's request was never sent
        ask(generator, [groups[0][:2]], GenerationOptions(samples=1), seed=0)  # a new audit: a new budget
        assert [len(a.answers) for a in groups[0][:2]] == [1, 1]
    finally:
        get_settings.cache_clear()
