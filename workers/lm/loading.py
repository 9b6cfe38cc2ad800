"""Loading a transformers model and tokenizer: device, precision, document-start token and fingerprint.

Kept apart from the scoring code so that both the HF backend and the benchmarks' baselines load models the same way.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from app.settings import ModelSpec, Settings
from core.files import file_sha256
from workers.lm import gguf_cache
from workers.lm.base import ModelLoadError
from workers.lm.registry import ModelSource

log = logging.getLogger(__name__)

# Files that determine a model's numbers: weights, configs, tokenizer data. READMEs and licences do not.
_FINGERPRINT_SUFFIXES = {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json", ".model", ".txt", ".tiktoken"}
# Token text GPT-2-style tokenizers (GPT-2, SmolLM, Qwen, ...) put between documents during pre-training; when the
# tokenizer does not prepend a BOS of its own, this is what the model saw before the first token of a document.
_DOCUMENT_SEPARATORS = ("<|endoftext|>",)


@dataclass
class LoadedModel:
    model: Any  # transformers PreTrainedModel
    tokenizer: Any  # transformers tokenizer
    device: torch.device
    dtype: torch.dtype
    document_start_id: int
    document_start: str
    max_length: int
    fingerprint: str
    origin: str = ""  # how it was loaded, e.g. "read the converted copy …" (said in the load line)


def pick_device(settings: Settings) -> torch.device:
    if settings.device == "cuda" or (settings.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def pick_dtype(spec: ModelSpec, device: torch.device) -> torch.dtype:
    """fp32 is exact and the CPU default; ``auto`` means bf16 (or fp16) on CUDA, fp32 on CPU."""
    if spec.dtype == "auto":
        if device.type != "cuda":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[spec.dtype]


def weights_fingerprint(source: ModelSource) -> str:
    """sha256 over the model's weight, config and tokenizer files (names and contents)."""
    if source.gguf_file:
        files = [source.directory / source.gguf_file]
    else:
        files = sorted(
            p
            for p in source.directory.rglob("*")
            if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES and not any(part.startswith(".") for part in p.parts)
        )
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(source.directory).as_posix().encode())
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()


def adapter_fingerprint(adapter: Path | None) -> str:
    """sha256 over a PEFT adapter's files (names and contents); empty without an adapter."""
    if adapter is None:
        return ""
    digest = hashlib.sha256()
    for path in sorted(p for p in adapter.iterdir() if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES):
        digest.update(path.name.encode())
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()


def apply_adapter(name: str, model: Any, adapter: Path) -> Any:
    """The model with a PEFT (LoRA) adapter merged into its weights: a plain transformers model again, scored by the
    same engine at the base model's cost."""
    try:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, str(adapter), is_trainable=False).merge_and_unload()
    except ImportError as exc:
        raise ModelLoadError(f"model {name!r}: an adapter needs the peft package ({exc.name or exc})") from exc
    except Exception as exc:  # peft raises ValueError, KeyError, OSError... for an adapter that does not fit
        raise ModelLoadError(f"model {name!r}: cannot apply the adapter in {adapter} ({exc})") from exc


def find_document_start(tokenizer: Any) -> int | None:
    """The token every sentence is conditioned on: the BOS the tokenizer prepends itself, else the vocabulary's
    document separator, else the declared BOS token. None when the model has no such token."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    special = tokenizer("a", add_special_tokens=True)["input_ids"]
    if len(special) > len(plain) and special[1 : 1 + len(plain)] == plain:
        return int(special[0])
    vocab = tokenizer.get_vocab()
    for text in _DOCUMENT_SEPARATORS:
        if text in vocab:
            return int(vocab[text])
    if tokenizer.bos_token_id is not None:
        return int(tokenizer.bos_token_id)
    return None


def context_length(model: Any, tokenizer: Any) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    # Tokenizers without a real limit report a huge sentinel (1e30); only trust a plausible one.
    limit = getattr(tokenizer, "model_max_length", 0)
    if isinstance(limit, int) and 0 < limit < 10_000_000:
        return limit
    raise ModelLoadError("the model's config gives no context length (max_position_embeddings)")


def load_tokenizer(name: str, source: ModelSource) -> Any:
    kwargs: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a missing tokenizer
        raise ModelLoadError(f"model {name!r}: no usable tokenizer in {source.location} ({exc})") from exc
    if not callable(tokenizer) or not hasattr(tokenizer, "get_vocab"):
        raise ModelLoadError(f"model {name!r}: {source.location} has no text tokenizer")
    return tokenizer


def _memoize_gguf_name_maps() -> None:
    """transformers' GGUF converter (``get_gguf_hf_weights_map``) builds gguf's ``TensorNameMap`` again for every
    submodule of the model, recursively, though the map depends only on (architecture, layer count) and is only read:
    memoized once per process (SmolLM2-135M's conversion: 18.4 -> 13.4 CPU-s; the converted tensors are the same,
    tests/workers/lm/test_gguf_cache.py compares the copy's NLLs with the conversion's)."""
    import gguf

    if not hasattr(gguf.get_tensor_name_map, "cache_info"):
        gguf.get_tensor_name_map = functools.lru_cache(maxsize=16)(gguf.get_tensor_name_map)


def _load_weights(name: str, source: ModelSource, dtype: torch.dtype) -> Any:
    kwargs: dict[str, Any] = {"local_files_only": True, "dtype": dtype}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
        _memoize_gguf_name_maps()
    try:
        return AutoModelForCausalLM.from_pretrained(source.location, **kwargs)
    except Exception as exc:
        raise ModelLoadError(f"model {name!r}: cannot load causal-LM weights from {source.location} ({exc})") from exc


@contextmanager
def library_output() -> Iterator[None]:
    """transformers logs through a stderr handler of its own and draws progress bars while it converts a GGUF file
    and loads weights. Its records go to the application's logging instead (the CLI prints them above its own
    progress bar), and its bars are drawn only when the application shows INFO records (``memaudit -v``, workers)."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()
    if logging.getLogger().isEnabledFor(logging.INFO):
        yield
        return
    hf_logging.disable_progress_bar()
    # the GGUF converter draws with tqdm directly and has no switch: give it a disabled tqdm while we load
    converter_tqdm = gguf_utils.tqdm
    gguf_utils.tqdm = lambda *args, **kwargs: tqdm(*args, **{**kwargs, "disable": True})
    try:
        yield
    finally:
        gguf_utils.tqdm = converter_tqdm
        hf_logging.enable_progress_bar()


def _load(name: str, source: ModelSource, dtype: torch.dtype, settings: Settings) -> tuple[Any, Any, str]:
    """Tokenizer and weights, from the converted copy of a GGUF file when there is one (and storing one when not).
    Returns (tokenizer, model on CPU, how it was loaded)."""
    if not source.gguf_file:
        return load_tokenizer(name, source), _load_weights(name, source, dtype), f"read {source.location}"
    sha = file_sha256(source.directory / source.gguf_file)
    entry = gguf_cache.entry_dir(settings, sha, dtype)
    cached = gguf_cache.cached_source(entry, sha)
    if cached is not None:
        try:
            return load_tokenizer(name, cached), _load_weights(name, cached, dtype), f"read the converted copy {entry}"
        except ModelLoadError as exc:
            log.warning("model %s: the converted copy is unusable (%s); converting the GGUF file again", name, exc)
            shutil.rmtree(cached.directory, ignore_errors=True)
    tokenizer, model = load_tokenizer(name, source), _load_weights(name, source, dtype)
    how = "converted the GGUF file"
    if gguf_cache.store(entry, sha, model, tokenizer):
        how += f" (copy stored in {entry}: later loads take seconds)"
    return tokenizer, model, how


def load_model(name: str, spec: ModelSpec, source: ModelSource, settings: Settings) -> LoadedModel:
    started = time.monotonic()
    if settings.torch_threads > 0:
        torch.set_num_threads(settings.torch_threads)
    device = pick_device(settings)
    dtype = pick_dtype(spec, device)
    with library_output():
        tokenizer, model, how = _load(name, source, dtype, settings)
        if source.adapter is not None:
            model, how = apply_adapter(name, model, source.adapter), f"{how}, merged the adapter {source.adapter}"
    document_start_id = find_document_start(tokenizer)
    if document_start_id is None:
        raise ModelLoadError(
            f"model {name!r}: its tokenizer has no BOS token and no <|endoftext|> document separator, so the first "
            "token of a sentence cannot be scored; add a bos_token to its tokenizer_config.json"
        )
    model = model.to(device).eval()
    document_start = tokenizer.convert_ids_to_tokens(document_start_id)
    # always the ORIGINAL files' hash (the GGUF file, not its converted copy): one fingerprint, one NLL cache; an
    # adapter's files enter it too, so a base model and its fine-tune never share cached NLLs or nulls
    weights = weights_fingerprint(source)
    if source.adapter is not None:
        weights = f"{weights}+adapter:{adapter_fingerprint(source.adapter)}"
    digest = hashlib.sha256(f"{weights}|{dtype}|{document_start_id}".encode()).hexdigest()
    log.info(
        "model %s ready on %s (%s) in %.1f s: %s",
        name,
        device,
        str(dtype).removeprefix("torch."),
        time.monotonic() - started,
        how,
    )
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        document_start_id=document_start_id,
        document_start=document_start,
        max_length=context_length(model, tokenizer),
        fingerprint=digest,
        origin=how,
    )
