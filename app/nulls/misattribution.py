"""Misattribution verdicts (GDPR Art. 16), read time: a stored fact's misattribution statistic (scoring: the best
false candidate's mean lead, core.measures.misattribution; generation: the most-said false value's share of the
answers, core.measures.answers) judged against the same statistic of the fictitious people's
facts of its shape in the verdict's null (m true values, in the pool or not). Reads only; nulls computed before the
statistic existed (a file exported before it, imported) hold no such statistic and say `uncalibrated`.
"""

from __future__ import annotations

from dataclasses import replace

from app.db.models import Audit, FactResult
from app.nulls.calibrate import Calibrator, Kept, Resolved, finished_null, null_key
from app.nulls.schemas import MisattributionRead
from core.measures.answers import TIE
from core.measures.null import MAX_TRUE_VALUES, EmpiricalNull, FactStat

OLD_RESULT = "this result was stored before the misattribution statistic existed: audit the subject again"
NO_FALSE_VALUE = "every candidate is a true value or merged into one: there is no false value to prefer"
OLD_NULL = (
    "the null was computed before the misattribution statistic existed: POST a null audit (kind null) to compute"
    " it again"
)
NO_SHAPE = "no null facts of this fact's shape (true values, in the pool or not): no p-value"
KEPT = 64  # misattribution nulls kept built per process (one per succeeded null's property and shape)
_built: Kept[tuple[str, str, int, int, bool], EmpiricalNull | None] = Kept(KEPT)


def _ties_against(result: FactResult) -> float:
    """The statistic the fact is judged by. Generation's share is discrete (k of K answers): every null fact with the
    same share counts against the fact (its tie-breaker, below TIE, is taken off), so a share the null's people reach
    as often as this one is never flagged — a conservative test, where the tie-breaker would make it exact. Measured
    (docs/lab/2026-11-28-misattribution-ties.md): the exact test flagged strangers whose names are like the model's
    training names at 2 of 10 answers, a share 8.9 % of the null's people reach; a false value said to a person's
    name is reported only where it is said more often than the null's people are told theirs."""
    assert result.misattribution is not None
    return result.misattribution - (TIE if result.generation is not None else 0.0)


def _why_none(result: FactResult) -> str:
    """Why a stored fact has no misattribution statistic."""
    if result.generation is not None:  # asked: a fact the model could not be asked about, or asked before it
        return str(result.generation.get("error") or OLD_RESULT)
    no_false = all(c.is_ground_truth for k in result.canaries for c in k.candidates)
    return NO_FALSE_VALUE if no_false else OLD_RESULT


class MisattributionJudge:
    """Judges facts' misattribution against the nulls a :class:`Calibrator` resolves (its cache shared)."""

    def __init__(self, calibrator: Calibrator) -> None:
        self.calibrator = calibrator

    def judge(self, audit: Audit, result: FactResult) -> MisattributionRead | None:
        """The fact's misattribution block; None where its null is not ready (pending, failed or missing)."""
        found = self.calibrator.resolve(audit, result.property_id)
        if found.status != "ready" or found.null is None:
            return None
        if result.misattribution is None:  # stored before the statistic, or no false candidate to prefer
            return MisattributionRead(uncalibrated=True, reason=_why_none(result))
        shape = ((result.n_values or 1), result.in_pool is not False)
        null, reason = self._null(found, shape)
        if null is None:
            return MisattributionRead(
                value=result.misattributed_value, statistic=result.misattribution, uncalibrated=True, reason=reason
            )
        # empirical, never the fitted tail (core.measures.null.tail_p_value was measured on the verdict's statistic,
        # not this one): p >= 1 / (null facts + 1), valid for any statistic of exchangeable null facts
        stat = FactStat(0.0, False, False, None, result.n_templates, statistic=_ties_against(result))
        p = (1 + null.at_least(stat)) / (1 + len(null))
        return MisattributionRead(
            value=result.misattributed_value,
            statistic=result.misattribution,
            p_value=p,
            misattributed=p <= self.calibrator.max_p,
        )

    def _null(self, found: Resolved, shape: tuple[int, bool]) -> tuple[EmpiricalNull | None, str]:
        """The null of the misattribution statistic for one shape, or why there is none. Built once per process
        and succeeded null (the last KEPT; calibrate.Kept, as finished_null keeps the null's facts): sorting them
        again for every read of a page was a read's cost."""
        if shape[0] > MAX_TRUE_VALUES or found.shapes.get(shape) is None:
            return None, NO_SHAPE
        assert found.row is not None

        def build() -> EmpiricalNull | None:
            facts = self._facts(found, shape)
            ok = bool(facts) and all(f.misattribution is not None for f in facts)
            return EmpiricalNull([replace(f, statistic=f.misattribution) for f in facts]) if ok else None

        built = _built.get((*null_key(self.calibrator.session, found.row), *shape), build)
        return built, "" if built is not None else OLD_NULL

    def _facts(self, found: Resolved, shape: tuple[int, bool]) -> list[FactStat]:
        """The null facts that judge a shape: one per fictitious person. A pseudo-truth null's other rows are no
        more draws: the best false value's soft lead does not depend on which other candidate stands in as the
        truth, so a person's pseudo-truths repeat one number (judged by them — 4 of its 7 properties — the
        knowledge-free model was flagged at 1.6 % at p <= 0.01); the people's own values alone judge, few as they
        are (a p-value no smaller than 1 / (people + 1): no flag at 0.01 from a null of 20 people)."""
        assert found.row is not None and found.null is not None
        if found.row.method != "pseudo":
            return found.shapes[shape].facts
        own = finished_null(self.calibrator.session, found.row, assigned_only=True).shapes.get(shape)
        return own.facts if own is not None else []
