"""Work planning: what is shared, what is left, and the memory-bounded batching (pure Python, no model)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workers.lm.plan import batch_rows, chunk_groups, make_plan

DOC = 0


def test_sentences_with_the_same_prefix_tokens_share_one_key() -> None:
    prefix = [DOC, 5, 6, 7]
    plan = make_plan([[*prefix, 8, 9], [*prefix, 10], [*prefix, 8, 9]], [prefix, prefix, prefix])
    assert plan.keys == [prefix]
    assert plan.tails == [[8, 9], [10]], "the duplicate sentence must be planned once"
    assert plan.sentence_of == [0, 1, 0]


def test_prefix_whose_tokens_are_not_a_prefix_shares_only_the_common_part() -> None:
    # "Barack Ob" + "ama": the prefix's last token (12) merged differently in the whole sentence (13, 14)
    plan = make_plan([[DOC, 11, 13, 14, 15]], [[DOC, 11, 12]])
    assert plan.keys == [[DOC, 11]] and plan.tails == [[13, 14, 15]]


def test_empty_prefix_shares_the_document_start_and_whole_sentence_prefix_leaves_no_tail() -> None:
    plan = make_plan([[DOC, 1, 2], [DOC, 3, 4]], [[DOC], [DOC, 3, 4]])
    assert plan.keys == [[DOC], [DOC, 3, 4]]
    assert plan.tails == [[1, 2], []]


@given(st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=6), min_size=1, max_size=20), st.data())
def test_key_plus_tail_is_always_the_sentence(bodies: list[list[int]], data: st.DataObject) -> None:
    sentences = [[DOC, *b] for b in bodies]
    prefixes = [[DOC, *data.draw(st.lists(st.integers(1, 4), max_size=6))] for _ in bodies]
    plan = make_plan(sentences, prefixes)
    for i, sentence in enumerate(sentences):
        s = plan.sentence_of[i]
        assert plan.keys[plan.group_of[s]] + plan.tails[s] == sentence


@given(st.lists(st.integers(1, 40), min_size=1, max_size=60), st.integers(1, 100))
def test_batches_respect_the_budget_and_cover_every_row_once(lengths: list[int], budget: int) -> None:
    uniform = batch_rows(lengths, budget, uniform=True)
    assert all(len({lengths[r] for r in b}) == 1 for b in uniform), "a uniform batch mixes lengths"
    for batches in (batch_rows(lengths, budget), uniform, chunk_groups(lengths, budget, max_groups=7)):
        assert sorted(r for b in batches for r in b) == list(range(len(lengths)))
        for b in batches:
            # a single over-long row still gets a batch of its own; otherwise rows x longest <= budget
            assert len(b) == 1 or len(b) * max(lengths[r] for r in b) <= budget
    assert all(len(c) <= 7 for c in chunk_groups(lengths, budget, max_groups=7))
