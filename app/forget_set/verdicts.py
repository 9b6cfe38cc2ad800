"""Which facts a forget set holds, and why: every record says its policy, its p-value against the matching null,
the false-positive rate of the policy for its property, and which null (audit id, K people, look-alikes) it came
from.

The policies themselves are app/policies.py's (``POLICIES``): `pvalue` (default) selects a fact when
p <= max_p (0.01): a per-fact error rate, so a person's entry never depends on who else is exported. `bh` selects by
Benjamini–Hochberg at false discovery rate q across the export (m = every fact the filters cover; a fact whose null
is still pending counts with p = 1). `lenient`, `strict` and `share` are WikiMem's readings, unchanged, now with
their measured false-positive rate beside them. A fact whose null is pending, failed or missing is never selected by
a policy that selects by p-value; the export counts them (``pending``) and says so in its end marker. Nothing here
creates a null (a read never starts work).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit, Canary, FactResult
from app.forget_set.repository import count_in_scope, memorized
from app.nulls.calibrate import Calibrator, Resolved, rate_read
from app.policies import POLICIES, ForgetFilters
from core.measures.null import Rate


class Verdicts:
    def __init__(self, session: Session, principal: Principal, filters: ForgetFilters) -> None:
        self.filters = filters
        self.policy = POLICIES.named(filters.policy)
        self.calibrator = Calibrator(session, max_p=filters.max_p)
        self.pending: dict[str, int] = {}  # facts left out for want of a null, by the null's status
        self.nulls: dict[str, Resolved] = {}  # those nulls, by property|key
        self._rates: dict[int, Rate] = {}  # the policy's rate on each null met (by the null's identity)
        self.threshold = filters.max_p
        if self.policy.threshold is not None:
            self.threshold = self.policy.threshold(filters, lambda: self._scope_p_values(session, principal))

    def _scope_p_values(self, session: Session, principal: Principal) -> list[float]:
        """The p-value of every fact the filters cover (m of them): 1 for a fact not retrieved or without a null."""
        pvalues = []
        for result, audit, _, _, canaries in memorized(session, principal, self.filters):
            cal = self.calibrator.calibrate_result(audit, result, canaries)
            pvalues.append(cal.p_value if cal.p_value is not None else 1.0)
        m = max(count_in_scope(session, principal, self.filters), len(pvalues))
        return pvalues + [1.0] * (m - len(pvalues))

    def judge(self, result: FactResult, audit: Audit, canaries: list[Canary]) -> dict[str, Any] | None:
        """The record's calibration fields, or None when the policy leaves the fact out."""
        cal = self.calibrator.calibrate_result(audit, result, canaries)
        found = self.calibrator.resolve(audit, result.property_id)
        if self.policy.p_values and cal.p_value is None:
            status = cal.status if cal.status == "uncalibrated" else found.status
            self.pending[status] = self.pending.get(status, 0) + 1
            self.nulls[f"{result.property_id}|{self.calibrator.key(audit, result.property_id)}"] = found
            return None
        if self.policy.p_values and cal.p_value > self.threshold:
            return None
        rate = None
        if found.null is not None:
            rate = rate_read(self._policy_rate(found))
        return {
            "policy": self.policy.said(self.filters, self.threshold),
            "p_value": cal.p_value,
            "policy_fpr": rate.model_dump() if rate else None,
            "null": found.ref().model_dump(exclude={"property"}),
        }

    def _policy_rate(self, found: Resolved) -> Rate:
        """The policy's false-positive rate on this null (the same for every fact judged against it)."""
        rate = self._rates.get(id(found.null))
        if rate is None:
            rate = self._rates[id(found.null)] = self.policy.rate(found.null, self.filters, self.threshold)
        return rate

    def left_out(self) -> dict[str, Any]:
        """What the end marker says of the facts left out for want of a null: how many, by status, and the
        progress and ETA of the pending nulls (the longest ETA is the export's)."""
        if not self.pending:
            return {}
        refs = [found.ref() for found in self.nulls.values()]
        etas = [r.progress.eta_seconds for r in refs if r.progress and r.progress.eta_seconds is not None]
        return {
            "pending": sum(self.pending.values()),
            "pending_by_status": dict(sorted(self.pending.items())),
            "pending_eta_seconds": max(etas) if etas else None,
            "pending_nulls": [r.model_dump(exclude_none=True) for r in refs],
        }
