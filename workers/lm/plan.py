"""Planning the engine's work: which token prefixes are shared and what is left to score after them.

Pure Python (no torch). Every sentence is tokenized WHOLE and then split, so the value scored is always the value of
the whole sentence's own tokenization; the caller's prefix only says where sharing is likely. The shared part of a
sentence is the longest common token prefix of its tokens and its prefix's tokens: when the prefix's tokens are not a
prefix of the sentence's (a BPE merge across the boundary), sharing simply stops earlier -- it is never wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Plan:
    """keys[g]: a shared token prefix (document start first); group_of[s], tails[s]: for each distinct sentence s,
    its key and the tokens after it; sentence_of[i]: the distinct sentence of input i (duplicates are scored once)."""

    keys: list[list[int]]
    group_of: list[int]
    tails: list[list[int]]
    sentence_of: list[int]


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def make_plan(sentences: Sequence[Sequence[int]], prefixes: Sequence[Sequence[int]]) -> Plan:
    """sentences[i]: document start + tokens of prefix_i + continuation_i (tokenized whole);
    prefixes[i]: document start + tokens of prefix_i (tokenized alone)."""
    distinct: dict[tuple[int, ...], int] = {}
    key_index: dict[tuple[int, ...], int] = {}
    plan = Plan(keys=[], group_of=[], tails=[], sentence_of=[])
    for seq, prefix in zip(sentences, prefixes, strict=True):
        whole = tuple(seq)
        if whole in distinct:
            plan.sentence_of.append(distinct[whole])
            continue
        # at least the document start is shared; at most the whole sentence (then nothing is left after the key)
        shared = max(1, common_prefix_length(seq, prefix))
        key = whole[:shared]
        if key not in key_index:
            key_index[key] = len(plan.keys)
            plan.keys.append(list(key))
        distinct[whole] = len(plan.tails)
        plan.sentence_of.append(len(plan.tails))
        plan.group_of.append(key_index[key])
        plan.tails.append(list(whole[shared:]))
    return plan


def chunk_groups(key_lengths: Sequence[int], max_tokens: int, max_groups: int) -> list[list[int]]:
    """Group indexes in chunks whose prefix pass fits the budget; shortest keys first (length bucketing)."""
    order = sorted(range(len(key_lengths)), key=lambda g: key_lengths[g])
    chunks: list[list[int]] = []
    current: list[int] = []
    for g in order:
        width = key_lengths[g]  # sorted ascending: the newest key is the longest of the chunk
        if current and ((len(current) + 1) * width > max_tokens or len(current) >= max_groups):
            chunks.append(current)
            current = []
        current.append(g)
    if current:
        chunks.append(current)
    return chunks


def batch_rows(
    lengths: Sequence[int], max_tokens: int, uniform: bool = False, longest_first: bool = False
) -> list[list[int]]:
    """Row indexes batched so that rows x longest stays within max_tokens (length bucketing: sorted, so neighbours
    are similar in length and little padding is computed). Shortest first unless ``longest_first``. uniform: a
    batch holds rows of one length only (a right-padded batch then computes no padding at all)."""
    order = sorted(range(len(lengths)), key=lambda r: -lengths[r] if longest_first else lengths[r])
    batches: list[list[int]] = []
    current: list[int] = []
    for r in order:
        width = max(lengths[r], lengths[current[0]]) if current else lengths[r]
        full = (len(current) + 1) * width > max_tokens
        if current and (full or (uniform and lengths[r] != lengths[current[0]])):
            batches.append(current)
            current = []
        current.append(r)
    if current:
        batches.append(current)
    return batches


def pack_rows(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Consecutive row indexes packed so that their total length stays within max_tokens (input order is kept:
    rows of the same key are adjacent, so a pack needs few distinct keys)."""
    packs: list[list[int]] = []
    current: list[int] = []
    used = 0
    for r, n in enumerate(lengths):
        if current and used + n > max_tokens:
            packs.append(current)
            current, used = [], 0
        current.append(r)
        used += n
    if current:
        packs.append(current)
    return packs
