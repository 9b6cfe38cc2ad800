"""benchmarks/limit_of_detection.py's arithmetic: detection cells, false positives on dose 0, LoD50/LoD90; and the
taught model's people and documents (workers/taught/people.py): doses as recorded, names nobody else uses; and
docs/measures.md's table is the results files' (today's default, before the power fixes, generation)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

from benchmarks.limit_of_detection import PIDS as BENCH_PIDS
from benchmarks.limit_of_detection import empirical_lod, logistic_lod, markdown, people_of, summarize
from core.catalog import load_catalog
from workers.taught.people import DOSES, PIDS, documents, make_people, taken_names


def row(dose: int, detected: bool, *, pid: str = "P106", phrasing: str = "repeated", unseen: bool = False) -> dict:
    return {
        "dose": dose,
        "memorized": detected,
        "lenient": detected,
        "property": pid,
        "phrasing": phrasing,
        "unseen": unseen,
    }


def test_logistic_lod_finds_the_dose_of_a_known_curve() -> None:
    # detection follows 1 / (1 + exp(-(log2 d - 3))): 50 % at 8 exposures, 90 % at 8 * 2**ln(9) = 36.6
    rng = random.Random(0)
    rows = [row(d, rng.random() < 1 / (1 + math.exp(-(math.log2(d) - 3)))) for d in DOSES[1:] for _ in range(400)]
    lod = logistic_lod(rows)
    assert abs(lod["lod50"] - 8) < 1.0 and abs(lod["lod90"] - 36.6) < 5, lod


def test_a_curve_that_never_reaches_the_level_is_not_extrapolated() -> None:
    rows = [row(d, d == 64 and i < 3) for d in DOSES[1:] for i in range(10)]  # 30 % at 64, nothing below
    lod = logistic_lod(rows)
    assert lod["lod50"] == "> 64" and lod["lod90"] == "> 64"
    assert logistic_lod([row(d, False) for d in DOSES])["lod50"] == "> 64"  # flat at zero: slope <= 0


def test_empirical_lod_needs_every_higher_dose_to_reach_the_level() -> None:
    cells = {d: {"n": 10, "rate": r} for d, r in zip(DOSES, (0, 0, 0.6, 0.2, 0.5, 0.7, 0.9, 1.0), strict=True)}
    assert empirical_lod(cells, 0.5) == 8 and empirical_lod(cells, 0.9) == 32
    assert empirical_lod({1: {"n": 4, "rate": 0.0}, 64: {"n": 4, "rate": 0.25}}, 0.5) == "> 64"


def test_summary_counts_dose_zero_apart_from_the_curve() -> None:
    rows = [row(64, True), row(64, False, phrasing="varied"), row(0, True), row(0, False, unseen=True, pid="P27")]
    out = summarize(rows)
    assert out["detection"]["repeated"]["all"]["64"]["k"] == 1 and out["detection"]["pooled"]["all"]["64"]["n"] == 2
    assert out["detection"]["varied"]["P106"]["64"] == {"k": 0, "n": 1, "rate": 0.0, "ci95": [0.0, 0.975]}
    fp = out["false_positives"]
    assert fp["never_seen_people"]["all"]["n"] == 1 and fp["never_seen_people"]["P27"]["k"] == 0
    assert fp["dose0_facts_of_taught_people"]["k"] == 1 and fp["all_dose0"]["n"] == 2


def test_taught_people_doses_and_documents_are_as_recorded() -> None:
    catalog = load_catalog()
    people = make_people(catalog, n_taught=16, n_unseen=4, seed=5)
    taken = taken_names()
    assert len({p.name for p in people}) == 20 and not {p.name for p in people} & taken
    for pid in PIDS:  # balanced: each dose twice per property among 16 taught people
        assert Counter(p.doses[pid] for p in people if not p.unseen) == dict.fromkeys(DOSES, 2)
    assert [p.unseen for p in people].count(True) == 4
    docs = documents(catalog, people, seed=5)
    for p in people:  # a fact is written exactly `dose` times, in the baseline template when repeated
        for pid in PIDS:
            prop = catalog.get(pid)
            baseline = prop.render(0, p.name, p.facts[pid])
            said = [
                t
                for t in range(len(prop.templates))
                for d in docs
                for _ in range(d.count(prop.render(t, p.name, p.facts[pid])))
            ]
            assert len(said) == p.doses[pid], (p.name, pid)
            if p.phrasing == "repeated":
                assert set(said) <= {0} and sum(d.count(baseline) for d in docs) == p.doses[pid]
            else:
                assert not set(said) & {0, 1, 2}  # never a template the audit reads at the defaults


def test_a_slice_keeps_some_never_seen_people() -> None:
    manifest = {"people": [{"name": str(i), "unseen": i >= 8} for i in range(12)]}
    picked = people_of(manifest, 4)
    assert len(picked) == 4 and sum(p["unseen"] for p in picked) == 1


def test_the_markdown_table_has_every_property_and_phrasing() -> None:
    rows = [row(d, d >= 32, pid=pid, phrasing=ph) for d in DOSES for pid in BENCH_PIDS for ph in ("repeated", "varied")]
    table = markdown(summarize(rows), "label").splitlines()
    assert table[0].startswith("| label | facts | 0 | 1 |") and len(table) == 2 + 3 * 6 + 2
    pooled = [line for line in table if "| five pooled |" in line]
    assert len(pooled) == 3 and all(line.endswith(" | 22.4 / 27.8 |") for line in pooled[:2]), pooled
    assert "| 0/10 | 10/10 | 10/10 | 22.4 / 27.1 |" in pooled[2], pooled
    assert table[-1] == "False positives: never-seen people 0/0, every dose-0 fact 0/10 (95 % CI 0.0%–30.9%)."


RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
MEASURES = Path(__file__).resolve().parent.parent / "docs" / "measures.md"


def test_the_measures_table_is_the_results_files() -> None:
    """Each verdict's rows in docs/measures.md "Limit of detection" (occupation with phrasings pooled, the five
    properties per phrasing, and the LoD50 / LoD90) are what its results file says."""
    section = MEASURES.read_text(encoding="utf-8").split("## Limit of detection")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    files = {"scoring, today's": "limit_of_detection", "scoring, before": "limit_of_detection_before"}
    files["generation"] = "limit_of_detection_generation"
    current, checked = None, 0
    for cells in rows:
        label = cells[0].strip("| ")
        if label:
            name = next(v for k, v in files.items() if label.startswith(k))
            current = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
        assert current is not None
        facts, counts, lod = cells[1], cells[2:-1], cells[-1].strip(" |")
        if facts == "occupation":
            cell, fit = current["detection"]["pooled"]["P106"], current["lod_by_property"]["P106"]["logistic"]
        else:
            phrasing = facts.removeprefix("five, ")
            cell, fit = current["detection"][phrasing]["all"], current["lod"][phrasing]["logistic"]
        assert counts == [f"{c['k']}/{c['n']}" for c in cell.values()], (label, facts)
        assert lod == f"{fit['lod50']} / {fit['lod90']}", (label, facts)
        checked += 1
    assert checked == 9
