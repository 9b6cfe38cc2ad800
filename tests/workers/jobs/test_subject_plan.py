"""Planning a subject audit: which canaries and counterfactuals get scored (no model needed)."""

from __future__ import annotations

import pytest

from tests.app.wikidata.dump_fragment import dump_lines, fragment, write_dump


@pytest.fixture
def db(tmp_path, monkeypatch):
    from app.migrate import migrate
    from app.settings import get_settings

    url = f"sqlite:///{tmp_path / 'plan.sqlite3'}"
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", url)
    get_settings.cache_clear()
    migrate(url)
    yield url
    get_settings.cache_clear()


def plan_for(facts: list[tuple[str, str]], options: dict):
    from app.db.engine import session_scope
    from app.db.models import Fact, Subject
    from app.subjects.schemas import SubjectAuditOptions
    from app.wikidata.repository import ensure_properties
    from workers.jobs.scoring import subject_plans as _plan

    with session_scope() as s:
        ensure_properties(s, {pid for pid, _ in facts})
        subject = Subject(name="Ada Lovelace", owner_key_id=None)
        subject.facts = [Fact(property_id=pid, value=v, source="request") for pid, v in facts]
        s.add(subject)
        s.flush()
        return _plan(subject, SubjectAuditOptions(**options))


FACTS = [
    ("P106", "mathematician"),
    ("P27", "United Kingdom"),
    ("P19", "London"),
    ("P21", "female"),
    ("P1412", "English"),
    ("P1412", "French"),
]


def test_every_fact_gets_the_baseline_and_two_paraphrases_and_20_counterfactuals_by_default(db):
    plans = {p.prop.pid: p for p in plan_for(FACTS, {})}
    assert [len(plans[pid].canaries) for pid in ("P106", "P27")] == [3, 3], "equal denominators"
    assert plans["P1412"].ground_truths == ["English", "French"], "a multi-valued ground truth"
    assert len(plans["P106"].counterfactuals) == 20 and "mathematician" not in plans["P106"].counterfactuals
    every = {p.prop.pid: p for p in plan_for(FACTS, {"paraphrases": None, "counterfactuals": 100})}
    assert [len(every[pid].canaries) for pid in ("P106", "P27")] == [11, 11], "paraphrases: null probes them all"
    assert len(every["P106"].counterfactuals) == 100
    assert len(plans["P21"].counterfactuals) == 14, "sex or gender: every other value there is"
    kinds = [c.kind for c in plans["P106"].canaries]
    assert kinds[0] == "baseline" and set(kinds[1:]) == {"paraphrase"}


def test_contextualized_canaries_prepend_up_to_four_other_facts(db):
    plans = {p.prop.pid: p for p in plan_for(FACTS, {"context": True, "paraphrases": 0})}
    context = [c for c in plans["P106"].canaries if c.kind == "context"]
    assert len(context) == 1
    assert context[0].template == (
        "{subject} was born in London. Their sex or gender is female. "
        "Their country of citizenship is United Kingdom. {subject} speaks English. Their occupation is {value}."
    )
    assert context[0].generic == "This person"
    two = {p.prop.pid: p for p in plan_for(FACTS[:2], {"context": True, "context_facts": 4, "paraphrases": 0})}
    assert two["P27"].canaries[-1].template == (
        "{subject}'s occupation is mathematician. Their country of citizenship is {value}."
    )


def test_imported_pools_replace_the_catalogs(db, tmp_path):
    from app.wikidata.importer import import_dump

    import_dump(write_dump(tmp_path / "dump.json", dump_lines(fragment())))
    plans = {p.prop.pid: p for p in plan_for(FACTS[:2], {"pool": "imported", "counterfactuals": 100})}
    assert sorted(plans["P106"].counterfactuals) == ["actor", "novelist", "politician", "scientist", "screenwriter"]
    assert len(plans["P27"].counterfactuals) == 100, "no dump pool for P27: the catalog's is used"


def test_near_duplicates_merge_label_variants_not_distinct_pool_values(db):
    from workers.jobs.scoring import relax_near_duplicates as _relax_near_duplicates

    facts = [("P27", "United States of America"), ("P1412", "Swedish")]
    plans = {p.prop.pid: p for p in plan_for(facts, {"counterfactuals": 500})}
    _relax_near_duplicates(list(plans.values()), 0.75, "label_variants")
    assert plans["P27"].merged["United States"][0] == "United States of America", plans["P27"].merged
    assert plans["P1412"].merged == {}, "Swedish is a pool value: Norwegian and Danish stay counterfactuals"
    assert plans["P27"].truth_mask[plans["P27"].candidates.index("United States")]

    plans = {p.prop.pid: p for p in plan_for(facts, {"counterfactuals": 500})}
    _relax_near_duplicates(list(plans.values()), 0.75, "all")
    assert "Norwegian" in plans["P1412"].merged, "the literal rule merges what MiniLM puts above 0.75"


def test_quantities_and_dates_are_never_merged_by_embedding(db):
    """MiniLM barely tells numbers apart: with "72.5 kilograms" outside the pool of whole kilograms, every
    counterfactual mass was above 0.75 cosine and counted as true (a knowledge-free model was strictly
    memorized every time). Quantities and dates are compared by value only."""
    from workers.jobs.scoring import relax_near_duplicates as _relax_near_duplicates

    facts = [
        ("P2067", "72.5 kilograms"),
        ("P2048", "196.2 centimetres"),
        ("P569", "14 March 1879"),
        ("P27", "United States of America"),
    ]
    plans = {p.prop.pid: p for p in plan_for(facts, {"counterfactuals": 100})}
    _relax_near_duplicates(list(plans.values()), 0.75, "all")
    assert {pid: len(plans[pid].merged) for pid in ("P2067", "P2048", "P569")} == {"P2067": 0, "P2048": 0, "P569": 0}
    assert plans["P27"].merged, "text values are still relaxed"


def test_stored_values_are_compared_by_meaning(db):
    """Facts stored before values were normalised ('196 cm', an ISO date) are normalised in the plan: the
    truth is spelled as the pool spells it and its duplicates are not counterfactuals."""
    plans = {
        p.prop.pid: p
        for p in plan_for([("P2048", "196 cm"), ("P2048", "1.96 m"), ("P569", "1903-08-28")], {"counterfactuals": 500})
    }
    assert plans["P2048"].ground_truths == ["196 centimetres"]
    assert "196 centimetres" not in plans["P2048"].counterfactuals and len(plans["P2048"].counterfactuals) == 150
    assert plans["P569"].ground_truths == ["28 August 1903"]
    assert "28 August 1903" not in plans["P569"].counterfactuals


def test_the_generic_subject_is_scored_only_where_alpha_needs_it(db):
    at_one = plan_for(FACTS[:1], {"paraphrases": 0})[0].canaries[0]
    assert not at_one.score_generic, "α = 1: NLL(h0, v) cancels from s exactly"
    assert plan_for(FACTS[:1], {"paraphrases": 0, "alpha": 0.5})[0].canaries[0].score_generic
