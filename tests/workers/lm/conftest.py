"""Fixtures for the LM backend tests: a tiny random Llama + byte-level BPE tokenizer built in a temp dir (seconds),
and the real smollm2-135m loaded once per test session (~30 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

CORPUS = [
    "Barack Obama's occupation is lawyer.",
    "This person's occupation is software engineer.",
    "Marie Curie was born in Warsaw and worked as a physicist for many years.",
    "The capital of France is Paris. Water boils at one hundred degrees.",
    "She speaks English, French and German; he speaks Polish.",
] * 20


def build_tiny_model(
    directory: Path, *, bos: bool = True, auto_bos: bool = False, seed: int = 0, context: int = 128
) -> Path:
    """Save a randomly initialised 2-layer Llama and its tokenizer to ``directory``.

    bos: declare ``<s>`` as the BOS token; auto_bos: the tokenizer also prepends it by itself (Llama-style).
    Weights are drawn wider than usual so the model's predictions are far from uniform (a test comparing NLLs
    of a near-uniform model would compare near-constants)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<s>", "</s>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(CORPUS, trainer)
    if auto_bos:
        core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    names = {"eos_token": "</s>", "pad_token": "<pad>"} | ({"bos_token": "<s>"} if bos else {})
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, **names)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
        initializer_range=0.3,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One thread while these tests run (restored after): on a shared 2-core machine two threads made the small ops
    of a tiny model 2-3x slower. Restoring keeps other test modules' thread settings intact."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def make_tiny_model():
    """The builder itself, for tests that need a variant (no BOS, auto BOS, other seed)."""
    return build_tiny_model


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny(tiny_dir: Path):
    from workers.lm import load_scorer

    return load_scorer(f"hf:{tiny_dir}")


@pytest.fixture(scope="session")
def smollm2():
    from workers.lm import load_scorer

    return load_scorer("smollm2-135m")
