"""The transformers backend's Generator (mode "generation"): sampled answers from the model the hf scorer has loaded
(``workers.lm.registry.get_scorer``: the weights are loaded once, for both ways to probe).

Completion prompts are continued after the document start, as the scorer scores sentences; a chat prompt goes
through the tokenizer's chat template where it has one, else its ``text`` is continued. Sampling is seeded per batch
(``torch.manual_seed`` inside ``torch.random.fork_rng``: the process's random state is left as it was); answers are
cut before the first newline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from app.settings import ModelSpec, Settings
from workers.lm.base import ProgressCallback, ScoringError, SentenceTooLong
from workers.lm.generation import Prompt, Sample, Usage
from workers.lm.hf import HFScorer

STOP = "\n"
SEED_STRIDE = 1_000_003  # each batch's seed: seed * stride + its first prompt's index


class HFGenerator:
    """A Generator over the hf scorer's loaded model (see workers.lm.generation.Generator for the contract)."""

    seeded = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.usage = Usage()

    @property
    def scorer(self) -> HFScorer:
        from workers.lm.registry import get_scorer

        scorer = get_scorer(self.name)  # the process's cache: never a second copy of the weights
        if not isinstance(scorer, HFScorer):
            raise ScoringError(f"model {self.name!r} is not a transformers model")
        return scorer

    @property
    def fingerprint(self) -> str:
        return self.scorer.fingerprint

    def prompt_ids(self, prompts: Sequence[Prompt]) -> list[list[int]]:
        """Token ids of each prompt: the chat template's rendering of ``messages`` where the tokenizer has one, else
        the document start and ``text``."""
        scorer = self.scorer
        template = getattr(scorer.tokenizer, "chat_template", None)
        out = []
        for index, prompt in enumerate(prompts):
            if prompt.messages and template:
                rendered = scorer.tokenizer.apply_chat_template(
                    list(prompt.messages), add_generation_prompt=True, tokenize=False
                )
                out.append(scorer.encode([rendered])[0])
            elif prompt.text is not None:
                out.append([scorer.document_start_id, *scorer.encode([prompt.text])[0]])
            else:
                raise ScoringError(f"prompt {index} has no text and the model has no chat template")
        return out

    @torch.inference_mode()
    def sample(
        self,
        prompts: Sequence[Prompt],
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
        top_logprobs: int = 0,
        on_progress: ProgressCallback | None = None,
    ) -> list[list[Sample]]:
        if not prompts:
            return []
        scorer = self.scorer
        seqs = self.prompt_ids(prompts)
        for index, seq in enumerate(seqs):
            if len(seq) + max_tokens > scorer.max_length:
                raise SentenceTooLong(index, len(seq) + max_tokens, scorer.max_length)
        per_batch = max(1, scorer.batch_tokens // max(1, n * (max(len(s) for s in seqs) + max_tokens)))
        out: list[list[Sample]] = []
        for start in range(0, len(seqs), per_batch):
            batch = seqs[start : start + per_batch]
            with torch.random.fork_rng(devices=[scorer.device] if scorer.device.type == "cuda" else []):
                torch.manual_seed(seed * SEED_STRIDE + start)
                out += self._batch(scorer, batch, n, temperature, max_tokens, top_logprobs)
            if on_progress is not None:
                on_progress(len(out))
        self.usage.add(queries=len(seqs), prompts=len(seqs), prompt_tokens=sum(len(s) for s in seqs))
        return out

    def _batch(
        self, scorer: HFScorer, seqs: list[list[int]], n: int, temperature: float, max_tokens: int, top: int
    ) -> list[list[Sample]]:
        width, pad = max(len(s) for s in seqs), scorer._pad_id()
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, seq in enumerate(seqs):  # left-padded
            ids[row, width - len(seq) :] = torch.as_tensor(seq)
            mask[row, width - len(seq) :] = 1
        sampling: dict[str, Any] = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        out = scorer.model.generate(
            input_ids=ids.to(scorer.device),
            attention_mask=mask.to(scorer.device),
            max_new_tokens=max_tokens,
            num_return_sequences=n if temperature > 0 else 1,  # greedy: one answer, given n times
            num_beams=1,
            pad_token_id=pad,
            stop_strings=[STOP],
            tokenizer=scorer.tokenizer,
            return_dict_in_generate=True,
            output_scores=top > 0,
            **(sampling if temperature > 0 else {"do_sample": False}),
        )
        generated = out.sequences[:, width:]
        texts = scorer.tokenizer.batch_decode(generated, skip_special_tokens=True)
        lengths = self._lengths(scorer, generated, pad)
        self.usage.add(samples=len(texts), completion_tokens=sum(lengths))
        logprobs = _top_logprobs(scorer, out.scores, lengths, top) if top > 0 else [None] * len(texts)
        samples = [Sample(t.split(STOP, 1)[0], lp) for t, lp in zip(texts, logprobs, strict=True)]
        if temperature <= 0:
            self.usage.add(samples=len(texts) * (n - 1))
            return [[samples[i]] * n for i in range(len(seqs))]
        return [samples[i * n : (i + 1) * n] for i in range(len(seqs))]

    @staticmethod
    def _lengths(scorer: HFScorer, generated: torch.Tensor, pad: int) -> list[int]:
        """Tokens each sample generated (up to and including its stop; padding after an early end excluded)."""
        eos = scorer.tokenizer.eos_token_id
        ends = {pad, eos} if eos is not None else {pad}
        out = []
        for row in generated.tolist():
            length = len(row)
            while length and row[length - 1] in ends:
                length -= 1
            out.append(min(len(row), length + 1) if length < len(row) else length)
        return out


def _top_logprobs(
    scorer: HFScorer, scores: Sequence[torch.Tensor], lengths: list[int], top: int
) -> list[tuple[dict[str, float], ...]]:
    """Per sample, per generated token: the ``top`` most likely tokens and their log-probabilities (of the
    distribution sampled from, temperature applied)."""
    steps = [torch.log_softmax(s.float(), dim=-1).topk(top, dim=-1) for s in scores]
    out = []
    for row, length in enumerate(lengths):
        tokens = []
        for step in steps[:length]:
            ids, values = step.indices[row].tolist(), step.values[row].tolist()
            tokens.append({scorer.tokenizer.decode([i]): float(v) for i, v in zip(ids, values, strict=True)})
        out.append(tuple(tokens))
    return out


def load_generator(name: str, spec: ModelSpec, settings: Settings) -> HFGenerator:
    return HFGenerator(name)


__all__ = ["HFGenerator", "load_generator"]
