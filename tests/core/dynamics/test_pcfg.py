"""The hierarchical PCFG generator: exact string probabilities, entropy control, determinism, known frequencies."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from core.dynamics.pcfg import PCFG, PCFGConfig, Rule, generate_pcfg, sample_corpus, zipf_for_entropy


def enumerate_derivations(grammar: PCFG) -> list[tuple[tuple[str, ...], float]]:
    """Every derivation of a finite grammar with its string and probability (independent of the inside algorithm
    under test)."""

    def derive(sym: str) -> list[tuple[tuple[str, ...], float]]:
        if grammar.is_terminal(sym):
            return [((sym,), 1.0)]
        out = []
        for rule in grammar.rules[sym]:
            for parts in itertools.product(*(derive(b) for b in rule.rhs)):
                out.append((sum((p[0] for p in parts), ()), rule.prob * math.prod(p[1] for p in parts)))
        return out

    return derive(grammar.start)


def enumerate_language(grammar: PCFG) -> dict[tuple[str, ...], float]:
    language: dict[tuple[str, ...], float] = {}
    for string, prob in enumerate_derivations(grammar):
        language[string] = language.get(string, 0.0) + prob
    return language


SMALL = PCFGConfig(
    depth=2,
    branching_min=1,
    branching_max=3,
    rules_per_symbol=2,
    symbols_per_level=2,
    vocab_size=3,
    rule_entropy=0.7,
    seed=3,
)


def test_inside_probabilities_match_enumeration_and_sum_to_one():
    grammar = generate_pcfg(SMALL)
    language = enumerate_language(grammar)
    assert sum(language.values()) == pytest.approx(1.0)
    # the tiny vocabulary makes the grammar ambiguous: some strings have several derivations to sum over
    assert len(enumerate_derivations(grammar)) > len(language)
    for string, prob in language.items():
        assert grammar.string_probability(string) == pytest.approx(prob, rel=1e-9), string
    assert grammar.string_probability(("t0",) * 40) == 0.0


def test_derivation_entropy_matches_enumeration_when_unambiguous():
    # wide vocabulary and one terminal per preterminal, so distinct derivations give distinct strings
    grammar = PCFG(
        {
            "S": [Rule("S", ("A", "B"), 0.25), Rule("S", ("B",), 0.75)],
            "A": [Rule("A", ("a",), 0.5), Rule("A", ("c", "d"), 0.5)],
            "B": [Rule("B", ("b",), 0.9), Rule("B", ("e",), 0.1)],
        }
    )
    language = enumerate_language(grammar)
    entropy = -sum(p * math.log(p) for p in language.values())
    assert grammar.derivation_entropy() == pytest.approx(entropy)
    assert grammar.expected_length() == pytest.approx(sum(p * len(s) for s, p in language.items()))


def test_rule_entropy_sets_the_share_of_maximum_entropy():
    for n, share in [(2, 0.1), (3, 0.5), (5, 0.9), (4, 1.0)]:
        p = zipf_for_entropy(n, share)
        assert p.sum() == pytest.approx(1.0)
        assert -(p * np.log(p)).sum() == pytest.approx(share * math.log(n), abs=1e-6)


def test_lower_rule_entropy_gives_a_lower_entropy_language_with_a_wider_frequency_spread():
    base = dict(depth=3, rules_per_symbol=3, symbols_per_level=3, vocab_size=8, seed=1)
    high = sample_corpus(generate_pcfg(PCFGConfig(rule_entropy=1.0, **base)), 300, seed=0)
    low = sample_corpus(generate_pcfg(PCFGConfig(rule_entropy=0.3, **base)), 300, seed=0)
    assert low.entropy_nats < high.entropy_nats / 2, (low.entropy_nats, high.entropy_nats)
    assert len(low.strings) < len(high.strings)
    assert max(low.counts) > 5 * max(high.counts), (low.counts[:5], high.counts[:5])


def test_sampled_frequencies_track_exact_probabilities():
    corpus = sample_corpus(generate_pcfg(SMALL), 4000, seed=1)
    assert corpus.size == 4000 and corpus.counts == sorted(corpus.counts, reverse=True)
    for string, count, prob in zip(corpus.strings[:5], corpus.counts[:5], corpus.probability[:5], strict=True):
        # binomial standard error; 5 sigma keeps the test from flaking while catching a wrong probability
        assert abs(count / 4000 - prob) < 5 * math.sqrt(prob * (1 - prob) / 4000), (string, count, prob)


def test_generation_is_deterministic_given_the_seed_and_differs_across_seeds():
    a = sample_corpus(generate_pcfg(SMALL), 200, seed=5)
    b = sample_corpus(generate_pcfg(SMALL), 200, seed=5)
    c = sample_corpus(generate_pcfg(PCFGConfig(**{**SMALL.__dict__, "seed": 4})), 200, seed=5)
    assert a == b
    assert a.strings != c.strings


def test_per_level_overrides_make_long_uniform_low_entropy_strings():
    cfg = PCFGConfig(
        depth=2, symbols_per_level=4, vocab_size=16, rules_per_level=(1, 2, 1), branching_per_level=(10, 5)
    )
    corpus = sample_corpus(generate_pcfg(cfg), 100, seed=0)
    assert {len(s) for s in corpus.strings} == {50}
    per_token = [-math.log(p) / 51 for p in corpus.probability]
    assert max(per_token) <= 10 * math.log(2) / 51 + 1e-9  # at most ten binary choices per string


def test_bad_settings_and_recursive_grammars_are_rejected():
    with pytest.raises(ValueError, match="rule_entropy"):
        generate_pcfg(PCFGConfig(rule_entropy=0.0))
    with pytest.raises(ValueError, match="rules_per_level"):
        generate_pcfg(PCFGConfig(depth=2, rules_per_level=(1, 2)))
    with pytest.raises(ValueError, match="recursive"):
        PCFG({"S": [Rule("S", ("S", "a"), 0.5), Rule("S", ("a",), 0.5)]})
    with pytest.raises(ValueError, match="sum to"):
        PCFG({"S": [Rule("S", ("a",), 0.5)]})
