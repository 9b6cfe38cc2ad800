"""Stored rows for tests of verdicts without running a model: a fact result whose best false value has a given
statistic, and a finished null of the audit's configuration whose fictitious facts have known verdict columns (the
forget set's tests and the misattribution tests alike)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

FINGERPRINT = "e" * 64


def stored_result(s, audit, subject, pid: str, truth: str, wrong: str | None, statistic: float | None):
    """A fact with a baseline and a paraphrase canary, whose best false value ``wrong`` has ``statistic``."""
    from app.db.models import Canary, CandidateScore, Fact, FactResult
    from core.catalog import load_catalog

    fact = Fact(property_id=pid, value=truth, source="request")
    subject.facts.append(fact)
    s.flush()
    prop = load_catalog().get(pid)
    result = FactResult(
        audit_id=audit.id,
        property_id=pid,
        fact_ids=[fact.id],
        share=0.0,
        strict=False,
        lenient=False,
        z_star=None,
        n_templates=2,
        statistic=-0.5,
        n_values=1,
        in_pool=True,
        misattribution=statistic,
        misattributed_value=wrong,
    )
    for i, kind in enumerate(("baseline", "paraphrase")):
        canary = Canary(
            template_index=i,
            template=prop.templates[i],
            kind=kind,
            generic_subject="This person",
            similar_names=["X", "Y"],
            rank=2,
            lead_margin=-1.0,
            z_star=None,
            memorized=False,
        )
        scores = [(wrong or "v", False, 1.0), (truth, True, 0.0)]
        canary.candidates = [
            CandidateScore(
                value=v, is_ground_truth=g, nll_subject=1.0, nll_generic=None, nll_similar=[1.0], score=sc, rank=r + 1
            )
            for r, (v, g, sc) in enumerate(scores)
        ]
        result.canaries.append(canary)
    s.add(result)


def finished_null(s, audit, pids: list[str], fingerprint: str, fields: Callable[[int], dict]) -> None:
    """A finished null of the audit's configuration on the model ``fingerprint``: per property 100 fictitious facts,
    fact i's verdict columns ``fields(i)`` (share, strict, lenient, z_star, n_z, statistic, misattribution, ...)."""
    from app.db.models import Audit, NullDistribution, NullFact
    from app.nulls.calibrate import Calibrator

    null = Audit(id=uuid.uuid4().hex, kind="null", model=audit.model, options={}, status="succeeded")
    s.add(null)
    s.flush()
    for pid in pids:
        row = NullDistribution(
            audit_id=null.id,
            model=audit.model,
            property_id=pid,
            key=Calibrator(s).key(audit, pid),
            config={"lookalikes": "reversed"},
            method="full",
            fingerprint=fingerprint,
            people=100,
            n_facts=100,
        )
        s.add(row)
        s.flush()
        common = {"distribution_id": row.id, "value": "v", "assigned": True}
        s.add_all(NullFact(person=i, name=f"Person {i}", **(common | fields(i))) for i in range(100))


def stored_null(s, audit, pids: list[str], with_statistic: bool = True) -> None:
    """A finished null of the audit's configuration: per property 100 fictitious facts, misattribution 0.5 for one
    and -1.0 for the others (None: a null from before the statistic)."""

    def fields(i: int) -> dict:
        misattribution = (0.5 if i == 0 else -1.0) if with_statistic else None
        return {"share": 0.0, "strict": False, "lenient": False, "z_star": None, "n_z": 0, "n_templates": 2} | {
            "statistic": -0.5 + i / 1000,
            "misattribution": misattribution,
        }

    finished_null(s, audit, pids, FINGERPRINT, fields)


def stored_answers(s, audit, subject, pid: str, truth: str, wrong: str, said: int, statistic: float) -> None:
    """A fact probed in mode generation: one prompt answered 10 times, ``said`` of them ``wrong``, with its
    misattribution ``statistic`` (the share of answers naming ``wrong``, as the job stores it)."""
    from app.db.models import Fact, FactResult

    fact = Fact(property_id=pid, value=truth, source="request")
    subject.facts.append(fact)
    s.flush()
    samples = [{"text": f" {wrong}.", "kind": "other", "value": wrong}] * said
    samples += [{"text": f" {truth}.", "kind": "true", "value": truth}] * (10 - said)
    prompt = {"template_index": 0, "form": "completion", "prompt": f"{subject.name} is", "samples": samples}
    generation = {
        "options": {"samples": 10},
        "prompts": [prompt],
        "counts": {"true": 10 - said, "other": said, "refusal": 0, "unreadable": 0},
        "most_said_other": wrong,
        "cost": {"queries": 1, "samples": 10},
    }
    s.add(
        FactResult(
            audit_id=audit.id,
            property_id=pid,
            fact_ids=[fact.id],
            share=(10 - said) / 10,
            strict=False,
            lenient=False,
            z_star=None,
            n_templates=1,
            statistic=-0.5,
            n_values=1,
            in_pool=True,
            generation=generation,
            misattribution=statistic,
            misattributed_value=wrong,
        )
    )
