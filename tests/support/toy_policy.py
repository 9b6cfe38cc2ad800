"""A sixth forget-set policy, written the way a new policy is written, without touching app/forget_set, the router,
the dashboard or the CLI: Bonferroni across the export, p <= max_p / m over the m facts the filters cover (a
family-wise error rate; stricter than Benjamini–Hochberg's false discovery rate).

Registered by one edit (``with POLICIES.registered(TOY): ...`` in a test; a real one is listed in
app/policies.py's ``POLICIES``), it is in GET /forget-set's enum and description, the dashboard's form,
``memaudit export --policy``'s choices and help, and every record it selects says its label and its rate on the
null."""

from __future__ import annotations

from collections.abc import Callable

from app.policies import ForgetFilters, Policy
from core.measures.null import EmpiricalNull, Rate

NAME = "bonferroni"


def threshold(f: ForgetFilters, p_values: Callable[[], list[float]]) -> float:
    m = len(p_values())  # every fact in scope, a fact without a p-value counted too
    return f.max_p / m if m else 0.0


def rate(null: EmpiricalNull, _: ForgetFilters, threshold: float) -> Rate:
    return null.pvalue_rate(threshold)


TOY = Policy(
    name=NAME,
    description="Bonferroni: p <= max_p / m over the m facts this export covers",
    control="a family-wise error rate across the export",
    rate=rate,
    threshold=threshold,
    label=lambda f, t: f"bonferroni(max_p={f.max_p:g}): p<={t:.4g}",
    export_wide=True,  # its threshold depends on the export: no per-fact rate in a fact's calibration
)
