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
    from app.subjects.repository import ensure_properties
    from app.subjects.schemas import SubjectAuditOptions
    from workers.jobs.subject import _plan

    with session_scope() as s:
        ensure_properties(s, {pid for pid, _ in facts})
        subject = Subject(name="Ada Lovelace", owner_key_id=None)
        subject.facts = [Fact(property_id=pid, value=v, source="request") for pid, v in facts]
        s.add(subject)
        s.flush()
        return _plan(subject, SubjectAuditOptions(**options))


FACTS = [("P106", "mathematician"), ("P27", "United Kingdom"), ("P19", "London"), ("P21", "female"),
         ("P1412", "English"), ("P1412", "French")]  # fmt: skip


def test_every_fact_gets_the_baseline_and_all_paraphrases_by_default(db):
    plans = {p.prop.pid: p for p in plan_for(FACTS, {})}
    assert [len(plans[pid].canaries) for pid in ("P106", "P27")] == [11, 11], "11 templates each"
    assert plans["P1412"].ground_truths == ["English", "French"], "a multi-valued ground truth"
    assert len(plans["P106"].counterfactuals) == 100 and "mathematician" not in plans["P106"].counterfactuals
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
    from workers.jobs.subject import _relax_near_duplicates

    facts = [("P27", "United States of America"), ("P1412", "Swedish")]
    plans = {p.prop.pid: p for p in plan_for(facts, {"counterfactuals": 500})}
    _relax_near_duplicates(list(plans.values()), 0.75, "label_variants")
    assert plans["P27"].merged["United States"][0] == "United States of America", plans["P27"].merged
    assert plans["P1412"].merged == {}, "Swedish is a pool value: Norwegian and Danish stay counterfactuals"
    assert plans["P27"].truth_mask[plans["P27"].candidates.index("United States")]

    plans = {p.prop.pid: p for p in plan_for(facts, {"counterfactuals": 500})}
    _relax_near_duplicates(list(plans.values()), 0.75, "all")
    assert "Norwegian" in plans["P1412"].merged, "the literal rule merges what MiniLM puts above 0.75"
