"""The lean training loop: exact fused head, parameter counts, memorization, resume, extraction."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from core.measures.capacity import memorized_bits, nats_to_bits
from workers.training import (
    GPTConfig,
    TrainConfig,
    Trainer,
    count_parameters,
    greedy_extracted,
    init_model,
    paper_smallest,
    sequence_nll,
    uniform_tokens,
)
from workers.training.fused_head import linear_cross_entropy, nll_per_position

TINY = GPTConfig(n_layer=1, d_model=16, n_head=2, vocab_size=16, seq_len=8)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize(("chunk", "shards"), [(7, 1), (64, 1), (1000, 1), (64, 2), (7, 3)])
def test_fused_head_matches_autograd(chunk: int, shards: int) -> None:
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(300, 12, generator=gen, requires_grad=True)
    w = torch.randn(50, 12, generator=gen, requires_grad=True)
    y = torch.randint(0, 50, (300,), generator=gen)
    ref = F.cross_entropy(h @ w.t(), y, reduction="none")
    ref_gh, ref_gw = torch.autograd.grad(ref.sum() * 0.3, [h, w])
    per_pos = torch.empty(300)
    loss = linear_cross_entropy(h, w, y, per_pos, chunk=chunk, shards=shards)
    gh, gw = torch.autograd.grad(loss * 0.3, [h, w])
    assert torch.allclose(per_pos, ref.detach(), atol=1e-5), "per-position NLL differs from cross_entropy"
    assert torch.allclose(gh, ref_gh, atol=1e-5), f"dL/dh max err {(gh - ref_gh).abs().max():.2e}"
    assert torch.allclose(gw, ref_gw, atol=1e-5), f"dL/dW max err {(gw - ref_gw).abs().max():.2e}"


def test_fused_head_is_exact_for_extreme_logits() -> None:
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(40, 8, generator=gen) * 200  # softmax of the true token underflows to 0 for many rows
    w = torch.randn(30, 8, generator=gen)
    y = torch.randint(0, 30, (40,), generator=gen)
    per_pos = torch.empty(40)
    linear_cross_entropy(h, w, y, per_pos)
    ref = F.cross_entropy(h @ w.t(), y, reduction="none")
    assert torch.isfinite(per_pos).all(), "underflowed rows must be recomputed in log space"
    assert torch.allclose(per_pos, ref, rtol=1e-4), "extreme-logit NLL differs from cross_entropy"
    assert torch.allclose(nll_per_position(h, w, y), ref, rtol=1e-4)


def test_paper_smallest_has_the_papers_parameter_count() -> None:
    cfg = paper_smallest()
    model = init_model(cfg, seed=0)
    assert count_parameters(model) == cfg.param_count() == 80_416


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"d_model": 30, "n_head": 4}, "divisible"),
        ({"vocab_size": 1}, "vocab_size"),
        ({"seq_len": 64, "n_positions": 32}, "longer than the context"),
    ],
)
def test_config_rejects_bad_architectures(kwargs: dict[str, int], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        GPTConfig(**kwargs)


def test_uniform_tokens_are_a_function_of_the_seed() -> None:
    a, b, c = (uniform_tokens(20, 8, 16, seed) for seed in (3, 3, 4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert int(a.min()) >= 0 and int(a.max()) < 16
    both = uniform_tokens(20, 8, 16, 3, heldout=5)
    assert torch.equal(both[:20], a), "members must not depend on how many held-out samples are drawn"
    assert not (both[20:, None] == a[None]).all(-1).any(), "held-out samples must differ from the members"


def test_training_memorizes_and_step_nll_is_pre_update_nll() -> None:
    tokens = uniform_tokens(16, TINY.seq_len, TINY.vocab_size, seed=0)
    model = init_model(TINY, seed=0)
    trainer = Trainer(model, tokens, TrainConfig(steps=150, lr=2e-2, warmup_steps=5))
    seen: list[torch.Tensor] = []
    trainer.run(callback=lambda info: seen.append(info.seq_nll.clone()) and None)
    assert len(seen) == 150
    start_bits = memorized_bits(nats_to_bits(seen[0].numpy()), TINY.seq_len, TINY.vocab_size)
    end_nll = sequence_nll(model, tokens)
    end_bits = memorized_bits(nats_to_bits(end_nll.numpy()), TINY.seq_len, TINY.vocab_size)
    entropy = 16 * TINY.seq_len * math.log2(TINY.vocab_size)
    assert end_bits > 0.5 * entropy > start_bits, f"memorized {start_bits:.0f} -> {end_bits:.0f} of {entropy:.0f}"
    # The step's NLL is taken before its update, so one more step must report what sequence_nll sees now.
    trainer.run(callback=lambda info: seen.append(info.seq_nll.clone()) and None, until_step=151)
    assert torch.allclose(seen[-1].double(), end_nll, atol=1e-3), "step NLL != evaluation NLL at same weights"


def test_resume_from_state_dict_continues_the_same_run() -> None:
    tokens = uniform_tokens(12, TINY.seq_len, TINY.vocab_size, seed=5)
    cfg = TrainConfig(steps=20, lr=1e-2, batch_size=6, seed=9)
    straight = Trainer(init_model(TINY, 1), tokens, cfg)
    straight.run()
    first = Trainer(init_model(TINY, 1), tokens, cfg)
    first.run(until_step=10)
    state = first.state_dict()
    resumed = Trainer(init_model(TINY, 2), tokens, cfg)  # different init: everything must come from the state
    resumed.load_state_dict(state)
    resumed.run()
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), f"{name} diverged after resume"


def test_greedy_extraction_matches_autoregressive_decoding() -> None:
    tokens = uniform_tokens(8, TINY.seq_len, TINY.vocab_size, seed=2)
    model = init_model(TINY, seed=3)
    Trainer(model, tokens, TrainConfig(steps=200, lr=3e-2, warmup_steps=5)).run()
    prefix = 3
    fast = greedy_extracted(model, tokens, prefix)
    with torch.no_grad():
        out = tokens[:, :prefix].clone()
        for _ in range(TINY.seq_len - prefix):
            padded = torch.cat([out, torch.zeros(8, TINY.seq_len - out.shape[1], dtype=torch.long)], 1)
            nxt = model.logits(padded)[:, out.shape[1]].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], 1)
    slow = (out == tokens).all(1)
    assert torch.equal(fast, slow), f"teacher-forced check {fast.tolist()} != generation {slow.tolist()}"
    assert bool(fast.any()), "a memorized tiny dataset should be extractable for some samples"


def test_bf16_training_runs_and_learns() -> None:
    tokens = uniform_tokens(16, TINY.seq_len, TINY.vocab_size, seed=0)
    model = init_model(TINY, seed=0)
    before = float(sequence_nll(model, tokens).sum())
    Trainer(model, tokens, TrainConfig(steps=60, lr=2e-2, precision="bf16", warmup_steps=5)).run()
    after = float(sequence_nll(model, tokens).sum())
    assert after < 0.8 * before, f"bf16 training did not reduce the NLL: {before:.1f} -> {after:.1f}"
    for name, p in model.named_parameters():
        assert torch.equal(p, p.to(torch.bfloat16).float()), f"{name} is not exactly representable in bf16"
