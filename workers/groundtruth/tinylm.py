"""Train a tiny causal LM (byte-level BPE tokenizer + small Llama) on a list of documents, from scratch.

Reusable by anything in memaudit that needs a model whose training data is known exactly: the ground-truth
model of fictitious people (scripts.train_groundtruth) and the coverage probe's synthetic catalogue (issue 5).

Conventions, shared with ``smollm2-135m`` so that scorers treat both alike:
  * id 0 is ``<|endoftext|>``, the document-start token; the tokenizer does NOT add it by itself, a scorer
    prepends it. Every training document is seen as ``<|endoftext|> text <|endoftext|>`` (the trailing one
    marks the end of the document, so greedy generation can stop there).
  * the tokenizer is byte-level BPE, so any string (unseen names, scrambled names, any script) tokenizes.
  * output directory loads with ``AutoModelForCausalLM.from_pretrained(dir)`` and
    ``AutoTokenizer.from_pretrained(dir)``; weights are ``model.safetensors`` (fp32).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from workers.lm.base import plain_ids

EOT = "<|endoftext|>"
PAD = "<|pad|>"


@dataclass(frozen=True)
class TrainStats:
    """What one training run did; returned alongside the directory for manifests and reports."""

    seconds: float
    steps: int
    epochs: float
    final_loss: float
    n_params: int
    n_train_tokens: int  # tokens in the epochs run (summed over epochs)


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE on ``texts``; ids 0 and 1 are ``<|endoftext|>`` and ``<|pad|>``.

    All 256 byte symbols are in the initial alphabet, so strings never seen in ``texts`` still encode.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOT,
        eos_token=EOT,
        unk_token=None,
        pad_token=PAD,
        add_bos_token=False,
    )


def build_model(vocab_size: int, *, n_layer: int, d_model: int, n_head: int, max_len: int) -> LlamaForCausalLM:
    """A small Llama (RoPE, RMSNorm, SwiGLU, tied embeddings: the SmolLM2 family, shrunk)."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=d_model,
        intermediate_size=4 * d_model,
        num_hidden_layers=n_layer,
        num_attention_heads=n_head,
        num_key_value_heads=n_head,
        max_position_embeddings=max_len,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
        rope_theta=10000.0,
    )
    return LlamaForCausalLM(config)


def encode_documents(tokenizer: PreTrainedTokenizerFast, texts: Sequence[str], max_len: int) -> list[list[int]]:
    """Each document as ``[EOT] + ids + [EOT]``; documents longer than ``max_len`` are cut into windows."""
    eot = tokenizer.convert_tokens_to_ids(EOT)
    docs: list[list[int]] = []
    for ids in plain_ids(tokenizer, texts):
        seq = [eot, *ids, eot]
        # windows overlap by one token so every token is predicted once with the one before it in context
        docs.extend(seq[i : i + max_len] for i in range(0, max(1, len(seq) - 1), max_len - 1))
    return [d for d in docs if len(d) >= 2]


def _batches(docs: list[list[int]], batch_size: int, rng: random.Random) -> list[list[list[int]]]:
    """Shuffle, then group documents of similar length so little compute goes into padding."""
    order = list(range(len(docs)))
    rng.shuffle(order)
    pool = 50 * batch_size  # sort within pools of 50 batches: similar lengths yet still a random mix
    out: list[list[list[int]]] = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: len(docs[i]))
        out.extend([docs[i] for i in chunk[b : b + batch_size]] for b in range(0, len(chunk), batch_size))
    rng.shuffle(out)
    return out


def _collate(batch: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(d) for d in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, doc in enumerate(batch):
        ids[row, : len(doc)] = torch.tensor(doc)
        mask[row, : len(doc)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


def _lr_at(step: int, total: int, lr: float, warmup: int) -> float:
    """Linear warm-up then cosine decay to 10% of the peak."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train_tiny_lm(
    texts: Sequence[str],
    out_dir: str | Path,
    *,
    seed: int = 0,
    vocab_size: int = 1024,
    n_layer: int = 2,
    d_model: int = 128,
    n_head: int = 4,
    max_len: int = 128,
    epochs: float = 10.0,
    batch_size: int = 32,
    lr: float = 3e-3,
    weight_decay: float = 0.0,
    warmup_steps: int = 100,
    threads: int | None = 1,
    tokenizer_texts: Sequence[str] | None = None,
    fresh_texts: Callable[[int], Sequence[str]] | None = None,
    log: Callable[[str], None] | None = print,
    log_every: int = 200,
) -> tuple[Path, TrainStats]:
    """Train a tokenizer and a tiny Llama on ``texts`` (one document each) and save both to ``out_dir``.

    Args:
        texts: training documents; each is seen as ``<|endoftext|> text <|endoftext|>``.
        out_dir: created if missing; receives config.json, model.safetensors, tokenizer files.
        seed: fixes tokenizer-independent randomness (init, shuffling); same inputs + seed → same weights
            on the same torch build and thread count.
        vocab_size: BPE vocabulary size (incl. 256 byte symbols and the 2 special tokens).
        n_layer, d_model, n_head: transformer shape (MLP width is 4·d_model).
        max_len: context length; longer documents are cut into windows.
        epochs: passes over ``texts`` (fractional allowed); the step count follows from it and batch_size.
        batch_size, lr, weight_decay, warmup_steps: AdamW with warm-up + cosine decay.
        threads: torch intra-op threads during training (None leaves torch's setting alone).
        tokenizer_texts: texts to fit the tokenizer on (default: ``texts`` + ``fresh_texts(0)``).
        fresh_texts: optional ``epoch -> documents`` added to that epoch only (filler drawn afresh each epoch,
            so the model learns its distribution without memorizing any one document). Must be deterministic.
        log: progress sink (None for silence); never receives document text.

    Returns:
        (out_dir as a Path, TrainStats).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prev_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        torch.manual_seed(seed)
        rng = random.Random(seed)
        if tokenizer_texts is None:
            tokenizer_texts = [*texts, *(fresh_texts(0) if fresh_texts else ())]
        tokenizer = train_tokenizer(tokenizer_texts, vocab_size)
        fixed = encode_documents(tokenizer, texts, max_len)

        def epoch_docs(epoch: int) -> list[list[int]]:
            return fixed + (encode_documents(tokenizer, fresh_texts(epoch), max_len) if fresh_texts else [])

        model = build_model(len(tokenizer), n_layer=n_layer, d_model=d_model, n_head=n_head, max_len=max_len)
        stats = _fit(
            model,
            epoch_docs,
            rng,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            weight_decay=weight_decay,
            warmup_steps=warmup_steps,
            log=log,
            log_every=log_every,
        )
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.model_max_length = max_len
        tokenizer.save_pretrained(out)
        _portable_tokenizer_class(out)
        return out, stats
    finally:
        torch.set_num_threads(prev_threads)


def _portable_tokenizer_class(out: Path) -> None:
    """Name the class transformers 4.x knows too (5.x writes its alias ``TokenizersBackend``)."""
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2) + "\n")


def _fit(
    model: LlamaForCausalLM,
    epoch_docs: Callable[[int], list[list[int]]],
    rng: random.Random,
    *,
    epochs: float,
    batch_size: int,
    lr: float,
    weight_decay: float,
    warmup_steps: int,
    log: Callable[[str], None] | None,
    log_every: int,
) -> TrainStats:
    pad_id = int(model.config.pad_token_id)
    docs = epoch_docs(0)
    steps_per_epoch = math.ceil(len(docs) / batch_size)
    total = max(1, round(epochs * steps_per_epoch))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
    model.train()
    start, step, epoch, recent, n_tokens = time.perf_counter(), 0, 0, [], 0
    while step < total:
        if epoch > 0:
            docs = epoch_docs(epoch)
        n_tokens += sum(len(d) for d in docs)
        epoch += 1
        for batch in _batches(docs, batch_size, rng):
            if step >= total:
                break
            for group in opt.param_groups:
                group["lr"] = _lr_at(step, total, lr, warmup_steps)
            ids, mask, labels = _collate(batch, pad_id)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            recent = [*recent[-49:], loss.item()]
            step += 1
            if log and (step % log_every == 0 or step == total):
                log(f"step {step}/{total} loss {sum(recent) / len(recent):.4f} ({time.perf_counter() - start:.0f}s)")
    model.eval()
    return TrainStats(
        seconds=time.perf_counter() - start,
        steps=total,
        epochs=total / steps_per_epoch,
        final_loss=sum(recent) / max(1, len(recent)),
        n_params=sum(p.numel() for p in model.parameters()),
        n_train_tokens=n_tokens,
    )
