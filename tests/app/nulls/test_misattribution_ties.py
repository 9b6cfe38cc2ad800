"""Generation's misattribution verdict counts ties against the fact (app.nulls.misattribution._ties_against;
docs/lab/2026-11-28-misattribution-ties.md): a share of answers the null's people reach as often is never flagged,
whatever the fact's tie-breaker drew; a share above every null person's is; scoring's continuous lead is unchanged."""

from __future__ import annotations

from types import SimpleNamespace

from app.nulls.misattribution import _ties_against
from core.measures.answers import misattribution, tiebreak
from core.measures.null import EmpiricalNull, FactStat


def p_value(null: EmpiricalNull, result: SimpleNamespace) -> float:
    stat = FactStat(0.0, False, False, None, 1, statistic=_ties_against(result))
    return (1 + null.at_least(stat)) / (1 + len(null))


def null_of(shares: list[float]) -> EmpiricalNull:
    return EmpiricalNull(
        [FactStat(0.0, False, False, None, 1, statistic=s + tiebreak("null", i)) for i, s in enumerate(shares)],
        tail=False,
    )


def test_a_share_the_null_reaches_counts_every_tie_against_the_fact():
    null = null_of([0.1] * 195 + [0.2] * 5)  # 5 of 200 null people told a false value twice in 10 answers
    # the tie-breaker that draws highest among the ties: the exact test would give (1 + 0) / 201 and flag it
    top = max(range(10_000), key=lambda i: tiebreak("fact", i))
    fact = SimpleNamespace(misattribution=0.2 + tiebreak("fact", top), generation={"prompts": []})
    assert p_value(null, fact) == (1 + 5) / 201
    above = SimpleNamespace(misattribution=0.3 + tiebreak("fact", 0), generation={"prompts": []})
    assert p_value(null, above) == 1 / 201  # a share no null person reached: flagged at 0.01


def test_scoring_leads_are_judged_as_stored():
    null = EmpiricalNull([FactStat(0.0, False, False, None, 1, statistic=x / 100) for x in range(200)], tail=False)
    fact = SimpleNamespace(misattribution=1.985, generation=None)  # a scoring fact: no answers
    assert p_value(null, fact) == (1 + 1) / 201  # only 1.99 is at least it; no tie-breaker taken off


def test_the_statistic_is_a_share_plus_a_tie_breaker_below_tie():
    from core.measures.answers import TIE

    stat, _ = misattribution([], SimpleNamespace(value_key=str), [], [], "x")
    assert 0.0 <= stat < TIE  # no answers: share 0, and the breaker alone
