"""A model that knows nothing must be memorized at chance, and no more, for every property type and policy.

Two knowledge-free scorers: one gives every sentence the same NLL, one gives each sentence an NLL drawn from a
seeded hash of its text (independent of the subject, the value and the truth). Facts go through the subject
job's own path — `_plan` (normalised truths, counterfactuals in the truth's format), near-duplicate relaxation,
`_pairs`, `canary_outcome`, `property_outcome` — and, for one subject per type, through the whole service
(API → embedded worker → NLL cache → stored results → facts reader).

With k candidates of which g count as true (near-duplicates included) and T templates, chance is: a rank-1
template with probability g/k (share), lenient 1 − (1 − g/k)^T, strict (g/k)^T. Constant NLLs give ties
everywhere, and ties go against the truth (the truth is first in the candidate list): rates are 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest

from tests.conftest import wait_for

# (property, a true value as a user might type it): every datatype, a non-grid quantity, an ISO date, a
# truth outside the pool for the string type (so relaxation runs), and a 3-value pool (chance lenient 0.99)
CASES = {
    "item": ("P106", "physicist"),
    "item, 3 candidates": ("P552", "left-handedness"),
    "string": ("P742", "Kip Marlow"),
    "quantity": ("P2067", "72.5 kg"),
    "quantity, cm": ("P2048", "196 cm"),
    "date": ("P569", "1879-03-14"),
}
FACTS_PER_TYPE = 300
Z = 3.5  # two-sided bound per rate; the scorers are seeded, so each check is deterministic


class ConstantScorer:
    """Every sentence has the same NLL: a model with no preference at all."""

    name = "knowledge-free"
    fingerprint = "knowledge-free-constant"
    document_start = ""
    max_length = 10**6

    def score(self, pairs, *, on_progress=None):
        return [30.0 for _ in pairs]

    def generate(self, prompts, max_new_tokens, stop="\n"):
        return ["" for _ in prompts]


class RandomScorer(ConstantScorer):
    """Each sentence's NLL is a seeded hash of its text, uniform in [20, 40) nats: no knowledge of anyone."""

    fingerprint = "knowledge-free-random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def score(self, pairs, *, on_progress=None):
        out = []
        for prefix, continuation in pairs:
            digest = hashlib.blake2b(f"{self.seed}|{prefix}{continuation}".encode(), digest_size=8).digest()
            out.append(20.0 + 20.0 * int.from_bytes(digest, "big") / 2**64)
        return out


def fictitious_name(rng: random.Random) -> str:
    syllables = ["ka", "lo", "mi", "ren", "sa", "tu", "vel", "no", "ri", "da", "per", "zo", "gan", "fi", "mel"]

    def word() -> str:
        return "".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))).capitalize()

    return f"{word()} {word()}"


def fact_outcome(scorer, pid: str, value: str, name: str, options: dict):
    """One fact through the job's plan / relax / score / outcome path; returns (PropertyOutcome, k, g, T)."""
    from app.db.models import Fact, Subject
    from app.subjects.schemas import SubjectAuditOptions
    from core.measures.wikimem import property_outcome
    from workers.jobs import scoring as job

    subject = Subject(name=name, owner_key_id=None)
    subject.facts = [Fact(property_id=pid, value=value, source="request")]
    [plan] = job.subject_plans(subject, SubjectAuditOptions(**options))
    job.relax_near_duplicates([plan], 0.75, "label_variants")
    pairs = [p for c in plan.canaries for rows in job.sentence_pairs(plan, c, name) for p in rows]
    nll = dict(zip((a + b for a, b in pairs), scorer.score(pairs), strict=True))
    outcomes = [job.canary_outcome(plan, c, name, nll, float(options.get("alpha", 1.0)))[0] for c in plan.canaries]
    return property_outcome(outcomes), len(plan.candidates), sum(plan.truth_mask), len(plan.canaries)


def rates(scorer, pid: str, value: str, n: int, options: dict) -> dict:
    rng = random.Random(pid)
    observed = {"lenient": 0.0, "strict": 0.0, "share": 0.0}
    expected = {"lenient": [], "strict": [], "share": []}
    templates = 0
    for _ in range(n):
        po, k, g, t = fact_outcome(scorer, pid, value, fictitious_name(rng), options)
        observed["lenient"] += po.lenient / n
        observed["strict"] += po.strict / n
        observed["share"] += po.share / n
        p = g / k
        expected["lenient"].append(1 - (1 - p) ** t)
        expected["strict"].append(p**t)
        expected["share"].append(p)
        templates = t
    out = {}
    for policy, ps in expected.items():
        mean = sum(ps) / n
        # a share averages T independent templates per fact
        trials = n * templates if policy == "share" else n
        sd = math.sqrt(sum(q * (1 - q) for q in ps) / n / trials)
        out[policy] = (observed[policy], mean, Z * sd + 0.5 / trials)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_random_nlls_are_memorized_at_chance(case):
    pid, value = CASES[case]
    got = rates(RandomScorer(seed=1), pid, value, FACTS_PER_TYPE, {})
    report = ", ".join(f"{p} {o:.4f} (chance {e:.4f} ± {b:.4f})" for p, (o, e, b) in got.items())
    print(f"\n{case} {pid}: {report}")
    for policy, (observed, chance, bound) in got.items():
        assert abs(observed - chance) <= bound, f"{case} ({pid}), {policy}: {report}"


@pytest.mark.parametrize("case", ["item", "quantity", "date"])
def test_random_nlls_at_chance_when_the_generic_subject_is_scored(case):
    pid, value = CASES[case]
    got = rates(RandomScorer(seed=2), pid, value, 100, {"alpha": 0.5, "paraphrases": None})  # every template
    for policy, (observed, chance, bound) in got.items():
        assert abs(observed - chance) <= bound, f"{case} ({pid}), α = 0.5, {policy}: {got}"


@pytest.mark.parametrize("case", list(CASES))
def test_constant_nlls_memorize_nothing(case):
    pid, value = CASES[case]
    got = rates(ConstantScorer(), pid, value, 20, {})
    assert all(observed == 0.0 for observed, _, _ in got.values()), f"{case} ({pid}): {got}"


@pytest.fixture
def knowledge_free(sqlite_env, monkeypatch, tmp_path):
    """A registered model whose loaded scorer is the test's: the service runs it like any other model."""
    from app.settings import get_settings
    from workers.lm import registry

    models = {"knowledge-free": {"path": str(tmp_path), "description": "scores without knowledge"}}
    monkeypatch.setenv("MEMAUDIT_MODELS", json.dumps(models))
    get_settings.cache_clear()

    def use(scorer) -> None:
        monkeypatch.setitem(registry._CACHE, "knowledge-free", scorer)

    return use


def audit(api, facts: list[tuple[str, str]], **options) -> dict:
    body = {
        "kind": "subject",
        "model": "knowledge-free",
        "options": options,
        "subject": {"name": "Kaloren Mivel", "facts": [{"property": p, "value": v} for p, v in facts]},
    }
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    done = wait_for(api, r.json()["id"], timeout=300)
    assert done["status"] == "succeeded", done
    return done


def test_the_service_stores_what_the_job_path_computes(knowledge_free, api_factory):
    """Through the API and the embedded worker: constant NLLs retrieve nothing (z̄* null, generic NLLs not scored
    at α = 1); random NLLs give the same verdicts as the job path above; values are stored normalised."""
    api = api_factory("auditor")
    facts = [CASES[c] for c in ("item", "string", "quantity", "date")]
    knowledge_free(ConstantScorer())
    done = audit(api, facts)
    assert done["summary"]["memorized_lenient"] == 0 and done["summary"]["mean_z_star"] is None, done["summary"]
    page = api.get(f"/audits/{done['id']}/facts", params={"detail": "candidates"}).json()["facts"]
    stored = {f["property"]: f["values"] for f in page}
    assert stored == {
        "P106": ["physicist"],
        "P742": ["Kip Marlow"],
        "P2067": ["72.5 kilograms"],
        "P569": ["14 March 1879"],
    }, stored
    for f in page:
        assert not f["lenient"] and f["share"] == 0.0 and f["z_star"] is None
        for canary in f["canaries"]:
            assert canary["rank"] == len(canary["candidates"]) and canary["z_star"] is None
            assert all(c["nll_generic"] is None for c in canary["candidates"]), "α = 1: h0 cancels, not scored"

    knowledge_free(RandomScorer(seed=3))
    facts.append(CASES["item, 3 candidates"])  # chance lenient 0.99: some template ranks the truth first
    done = audit(api, facts, alpha=0.5)
    page = api.get(f"/audits/{done['id']}/facts", params={"detail": "candidates"}).json()["facts"]
    by_pid = {f["property"]: f for f in page}
    for pid, value in facts:
        expected, *_ = fact_outcome(RandomScorer(seed=3), pid, value, "Kaloren Mivel", {"alpha": 0.5})
        stored = by_pid[pid]
        assert (stored["share"], stored["lenient"], stored["strict"]) == (
            expected.share,
            expected.lenient,
            expected.strict,
        ), pid
        assert all(c["nll_generic"] is not None for k in stored["canaries"] for c in k["candidates"])

    # z* exists only on rank-1 templates, and a fact's z̄* is their mean: what the forget set's min_z filters
    for f in page:
        rank1 = [c["z_star"] for c in f["canaries"] if c["memorized"]]
        assert all(c["z_star"] is None for c in f["canaries"] if not c["memorized"])
        assert f["z_star"] == (pytest.approx(sum(rank1) / len(rank1)) if rank1 else None), f["property"]
    handedness = by_pid["P552"]
    assert handedness["lenient"] and handedness["z_star"] is not None, handedness
    pipeline = api_factory("pipeline")

    def exported(min_z: float) -> set[str]:
        r = pipeline.get("/forget-set", params={"audit_id": done["id"], "min_z": min_z, "policy": "lenient"})
        lines = [json.loads(line) for line in r.text.splitlines()]
        assert lines[-1] == {"_end": {"records": len(lines) - 1}}, "a complete export ends with its marker"
        return {line["property"] for line in lines[:-1]}

    assert "P552" in exported(handedness["z_star"] - 1e-6) and "P552" not in exported(handedness["z_star"] + 1e-6)
