"""Hierarchical probabilistic context-free grammars: the synthetic test bed of Ghosh et al. (2025).

A grammar has ``depth`` levels of nonterminals below the start symbol ``S`` (level 0). Every nonterminal at level
i < depth rewrites to ``rules_per_symbol`` alternatives, each a sequence of ``branching_min..branching_max``
nonterminals of level i+1; nonterminals of the last level rewrite to one terminal each. The rule probabilities of
every nonterminal follow a Zipf law whose exponent is solved so that their entropy is ``rule_entropy`` times the
maximum (log of the number of rules): 1.0 is uniform (a high-entropy language), values near 0 make one rule
dominate (a low-entropy, highly predictable language). Because every string's probability is known exactly (the
inside algorithm, which also covers ambiguous grammars), a user can calibrate memorization measures on data whose
predictability is known.

Pure Python + numpy; deterministic given ``seed``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cache

import numpy as np

Symbol = str  # nonterminals are "S", "N<level>_<j>"; terminals are "t<j>"


@dataclass(frozen=True)
class PCFGConfig:
    depth: int = 3
    branching_min: int = 2
    branching_max: int = 2
    rules_per_symbol: int = 3
    symbols_per_level: int = 3
    vocab_size: int = 8
    rule_entropy: float = 1.0  # share of the maximum entropy of each nonterminal's rule distribution, in (0, 1]
    seed: int = 0
    # optional per-level overrides: alternatives per nonterminal at levels 0..depth (the last = terminals per
    # preterminal), and a fixed right-hand-side width at levels 0..depth-1. Deterministic levels (1 rule) with wide
    # branching make long, low-entropy strings whose randomness sits in a few places.
    rules_per_level: tuple[int, ...] | None = None
    branching_per_level: tuple[int, ...] | None = None

    def rules_at(self, level: int) -> int:
        return self.rules_per_level[level] if self.rules_per_level else self.rules_per_symbol

    def width_range(self, level: int) -> tuple[int, int]:
        if self.branching_per_level:
            return self.branching_per_level[level], self.branching_per_level[level]
        return self.branching_min, self.branching_max

    def validate(self) -> None:
        checks = {
            "depth": self.depth >= 1,
            "branching_min": 1 <= self.branching_min <= self.branching_max,
            "rules_per_symbol": self.rules_per_symbol >= 1,
            "rules_per_level": self.rules_per_level is None
            or (len(self.rules_per_level) == self.depth + 1 and min(self.rules_per_level) >= 1),
            "branching_per_level": self.branching_per_level is None
            or (len(self.branching_per_level) == self.depth and min(self.branching_per_level) >= 1),
            "symbols_per_level": self.symbols_per_level >= 1,
            "vocab_size": self.vocab_size >= 1,
            "rule_entropy": 0.0 < self.rule_entropy <= 1.0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid PCFG settings: {', '.join(bad)}")


@dataclass(frozen=True)
class Rule:
    lhs: Symbol
    rhs: tuple[Symbol, ...]
    prob: float


class PCFG:
    """A probabilistic CFG without epsilon rules: ``rules[lhs]`` lists the alternatives of each nonterminal."""

    def __init__(self, rules: dict[Symbol, list[Rule]], start: Symbol = "S") -> None:
        for lhs, alts in rules.items():
            total = sum(r.prob for r in alts)
            if not math.isclose(total, 1.0, abs_tol=1e-9):
                raise ValueError(f"rule probabilities of {lhs} sum to {total}, not 1")
        self.rules = rules
        self.start = start
        self.terminals = sorted({s for alts in rules.values() for r in alts for s in r.rhs if s not in rules})
        self._lengths: dict[Symbol, frozenset[int]] = {}
        self._yield_lengths(start, ())

    def _yield_lengths(self, sym: Symbol, path: tuple[Symbol, ...]) -> frozenset[int]:
        """Every length a symbol can yield. Sampling and the inside pruning need a finite (non-recursive) grammar."""
        if self.is_terminal(sym):
            return frozenset({1})
        if sym in path:
            raise ValueError(f"recursive grammar ({sym} derives itself); only hierarchical grammars are supported")
        if sym not in self._lengths:
            out: set[int] = set()
            for rule in self.rules[sym]:
                sums = {0}
                for b in rule.rhs:
                    sums = {a + n for a in sums for n in self._yield_lengths(b, (*path, sym))}
                out |= sums
            self._lengths[sym] = frozenset(out)
        return self._lengths[sym]

    def is_terminal(self, sym: Symbol) -> bool:
        return sym not in self.rules

    def sample(self, rng: np.random.Generator) -> tuple[Symbol, ...]:
        out: list[Symbol] = []
        stack: list[Symbol] = [self.start]
        while stack:
            sym = stack.pop()
            if self.is_terminal(sym):
                out.append(sym)
                continue
            alts = self.rules[sym]
            rule = alts[int(rng.choice(len(alts), p=[r.prob for r in alts]))]
            stack.extend(reversed(rule.rhs))
        return tuple(out)

    def string_probability(self, string: tuple[Symbol, ...]) -> float:
        """p(x) = sum over derivations of x (the inside algorithm over spans)."""
        n = len(string)

        @cache
        def inside(sym: Symbol, i: int, j: int) -> float:
            if self.is_terminal(sym):
                return 1.0 if j == i + 1 and string[i] == sym else 0.0
            return sum(r.prob * seq(r.rhs, i, j) for r in self.rules[sym])

        @cache
        def seq(rhs: tuple[Symbol, ...], i: int, j: int) -> float:
            if not rhs:
                return 1.0 if i == j else 0.0
            # only split where the first symbol can yield exactly m - i tokens (no epsilon rules)
            heads = self._yield_lengths(rhs[0], ())
            return sum(inside(rhs[0], i, i + w) * seq(rhs[1:], i + w, j) for w in heads if i + w <= j)

        return inside(self.start, 0, n)

    def derivation_entropy(self) -> float:
        """H of the derivation distribution in nats: H(A) = H(rules of A) + sum_r p_r sum_{B in rhs} H(B).
        Equals the entropy of the string distribution when the grammar is unambiguous, an upper bound otherwise."""

        @cache
        def h(sym: Symbol) -> float:
            if self.is_terminal(sym):
                return 0.0
            alts = self.rules[sym]
            own = -sum(r.prob * math.log(r.prob) for r in alts if r.prob > 0)
            return own + sum(r.prob * sum(h(b) for b in r.rhs) for r in alts)

        return h(self.start)

    def expected_length(self) -> float:
        @cache
        def ln(sym: Symbol) -> float:
            if self.is_terminal(sym):
                return 1.0
            return sum(r.prob * sum(ln(b) for b in r.rhs) for r in self.rules[sym])

        return ln(self.start)


def zipf_probs(n: int, exponent: float) -> np.ndarray:
    weights = np.arange(1, n + 1, dtype=float) ** (-exponent)
    return weights / weights.sum()


def entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def zipf_for_entropy(n: int, share: float) -> np.ndarray:
    """Zipf probabilities over n rules whose entropy is ``share`` x log(n) (bisection on the exponent)."""
    if n == 1 or share >= 1.0:
        return np.full(n, 1.0 / n)
    target = share * math.log(n)
    lo, hi = 0.0, 1.0
    while entropy(zipf_probs(n, hi)) > target and hi < 1e4:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if entropy(zipf_probs(n, mid)) > target else (lo, mid)
    return zipf_probs(n, (lo + hi) / 2)


def _level_symbols(cfg: PCFGConfig, level: int) -> list[Symbol]:
    return ["S"] if level == 0 else [f"N{level}_{j}" for j in range(cfg.symbols_per_level)]


def _alternatives(
    rng: np.random.Generator, options: list[Symbol], cfg: PCFGConfig, level: int
) -> list[tuple[Symbol, ...]]:
    """Distinct right-hand sides (as many as the options allow, up to the level's number of rules)."""
    seen: dict[tuple[Symbol, ...], None] = {}
    wanted = cfg.rules_at(level)
    low, high = cfg.width_range(level)
    for _ in range(wanted * 50):
        if len(seen) == wanted:
            break
        width = int(rng.integers(low, high + 1))
        seen.setdefault(tuple(options[int(k)] for k in rng.integers(0, len(options), size=width)), None)
    return list(seen)


def generate_pcfg(cfg: PCFGConfig) -> PCFG:
    """Build a random hierarchical PCFG from ``cfg`` (deterministic given cfg.seed)."""
    cfg.validate()
    rng = np.random.default_rng(cfg.seed)
    terminals = [f"t{j}" for j in range(cfg.vocab_size)]
    rules: dict[Symbol, list[Rule]] = {}
    for level in range(cfg.depth + 1):
        for lhs in _level_symbols(cfg, level):
            if level == cfg.depth:
                picks = rng.permutation(cfg.vocab_size)[: cfg.rules_at(level)]
                rhss = [(terminals[int(k)],) for k in picks]
            else:
                rhss = _alternatives(rng, _level_symbols(cfg, level + 1), cfg, level)
            # a random permutation so the most likely rule is not always the first generated
            probs = zipf_for_entropy(len(rhss), cfg.rule_entropy)[rng.permutation(len(rhss))]
            rules[lhs] = [Rule(lhs, rhs, float(p)) for rhs, p in zip(rhss, probs, strict=True)]
    return PCFG(rules)


@dataclass(frozen=True)
class Corpus:
    """A sampled training set: unique strings with their counts (the known frequency) and exact probability."""

    strings: list[tuple[Symbol, ...]]
    counts: list[int]
    probability: list[float]
    vocab: list[Symbol]
    entropy_nats: float  # derivation entropy of the grammar
    expected_length: float

    @property
    def size(self) -> int:
        return sum(self.counts)

    def token_ids(self) -> list[list[int]]:
        index = {t: i for i, t in enumerate(self.vocab)}
        return [[index[t] for t in s] for s in self.strings]

    def texts(self) -> list[str]:
        return [" ".join(s) for s in self.strings]


def sample_corpus(grammar: PCFG, n: int, seed: int = 0) -> Corpus:
    """Draw n strings i.i.d. from the grammar; unique strings keep their counts, most frequent first."""
    if n < 1:
        raise ValueError("n must be at least 1")
    rng = np.random.default_rng(seed)
    counts = Counter(grammar.sample(rng) for _ in range(n))
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    strings = [s for s, _ in ordered]
    return Corpus(
        strings=strings,
        counts=[c for _, c in ordered],
        probability=[grammar.string_probability(s) for s in strings],
        vocab=list(grammar.terminals),
        entropy_nats=grammar.derivation_entropy(),
        expected_length=grammar.expected_length(),
    )
