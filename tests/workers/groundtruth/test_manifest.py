"""The shipped ground-truth manifest is consistent with itself, the catalog and the corpus recipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalog import load_catalog
from core.measures.wikimem import similar_names
from workers.groundtruth import people as gt_people

MANIFEST = Path(__file__).resolve().parents[3] / "workers" / "groundtruth" / "manifest.json"


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def test_trained_and_held_out_are_disjoint_and_distinct(manifest: dict) -> None:
    trained = [p["name"] for p in manifest["trained"]]
    held_out = [p["name"] for p in manifest["held_out"]]
    assert len(trained) >= 60 and len(held_out) >= 30, f"{len(trained)} trained, {len(held_out)} held out"
    assert len(set(trained)) == len(trained), "duplicate trained names"
    assert len(set(held_out)) == len(held_out), "duplicate held-out names"
    assert not set(trained) & set(held_out), f"in both splits: {sorted(set(trained) & set(held_out))[:3]}"


def test_facts_use_catalog_properties_and_pool_values(manifest: dict) -> None:
    catalog = load_catalog()
    for split in ("trained", "held_out"):
        for person in manifest[split]:
            assert set(person["facts"]) == set(gt_people.PIDS), f"{split} person has pids {set(person['facts'])}"
            for pid, values in person["facts"].items():
                prop = catalog.get(pid)
                assert 1 <= len(values) <= 2 and len(set(values)) == len(values), f"{pid}: bad values {values}"
                for value in values:
                    assert value in prop.pool, f"{pid} value {value!r} is not in the catalog pool"
                    assert prop.validate_value(value) is None, f"{pid} value {value!r} fails validation"
    multi = sum(len(p["facts"][gt_people.MULTI_VALUED]) == 2 for p in manifest["trained"])
    assert multi >= 5, f"only {multi} trained people have two languages (multi-valued ground truth)"


def test_template_split_covers_every_template(manifest: dict) -> None:
    catalog = load_catalog()
    for pid, info in manifest["properties"].items():
        n = len(catalog.get(pid).templates)
        trained, unseen = info["trained_templates"], info["unseen_templates"]
        assert 0 in trained, f"{pid}: the baseline template must carry the facts"
        assert sorted(trained + unseen) == list(range(n)), f"{pid}: template split {trained}/{unseen} vs {n}"
        assert unseen, f"{pid}: no paraphrase is left unseen, generalization cannot be tested"


def test_name_parts_are_shared_so_only_full_names_identify(manifest: dict) -> None:
    trained = [p["name"].split() for p in manifest["trained"]]
    firsts = {f for f, _ in trained}
    lasts = {s for _, s in trained}
    for first, last in (p["name"].split() for p in manifest["held_out"]):
        assert first in firsts and last in lasts, "a held-out name part never occurs in training"
    per_first = min(sum(f == x for f, _ in trained) for x in firsts)
    assert per_first >= 2, "some first name belongs to a single trained person: it alone identifies them"


def test_similar_names_never_collide_with_real_people(manifest: dict) -> None:
    names = {p["name"] for split in ("trained", "held_out") for p in manifest[split]}
    for name in names:
        variants = similar_names(name, 4)
        assert len(variants) == 4, f"expected 4 variants, got {len(variants)}"
        clash = [v for v in variants if v in names]
        assert not clash, f"a similar-name variant equals a corpus name: {clash}"


def test_recipe_regenerates_the_manifests_people() -> None:
    """The manifest is exactly what the training script's recipe produces (nothing edited by hand)."""
    from scripts.train_groundtruth import RECIPE, build, manifest_for

    catalog = load_catalog()
    people, templates, corpus = build(catalog, RECIPE)
    shipped = json.loads(MANIFEST.read_text(encoding="utf-8"))
    fresh = manifest_for(catalog, RECIPE, people, templates, corpus, {})
    for key in ("trained", "held_out", "properties"):
        assert fresh[key] == shipped[key], (
            f"manifest {key!r} differs from what RECIPE generates (catalog changed?): "
            "retrain with `python -m scripts.train_groundtruth`"
        )


def test_held_out_people_appear_nowhere_in_training() -> None:
    from scripts.train_groundtruth import RECIPE, build, fresh_documents

    catalog = load_catalog()
    people, _, corpus = build(catalog, RECIPE)
    held_out = {p.name for p in people if p.split == "held_out"}
    documents = [*corpus, *fresh_documents(catalog, RECIPE, people)(0), *fresh_documents(catalog, RECIPE, people)(7)]
    leaked = sum(any(name in d for name in held_out) for d in documents)
    assert leaked == 0, f"{leaked} training documents mention a held-out person"
    trained = [p for p in people if p.split == "trained"]
    mentioned = sum(any(p.name in d for d in corpus) for p in trained)
    assert mentioned == len(trained), f"only {mentioned} of {len(trained)} trained people are in the corpus"
