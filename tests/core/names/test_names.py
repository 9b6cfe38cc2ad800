"""Look-alike names of the same origin and the fictitious null cohort."""

from __future__ import annotations

import pytest

from core.catalog import load_catalog
from core.names.fictitious import cohort, roster, roster_size
from core.names.lookalikes import _pools, fold, lookalike_names, name_origin, same_origin_names
from core.names.origins import BY_LOCALE, name_lists, transliterate


def test_same_origin_lookalikes_keep_the_origin_and_share_no_part():
    names, used = lookalike_names("Hiroshi Tanaka", 3, "same_origin")
    assert used == "same_origin" and len(set(names)) == 3
    japanese = name_lists("ja_JP")
    for name in names:
        first, last = name.split()
        assert first in japanese.first["male"] and last in japanese.last["male"]  # a male Japanese name
        assert not {fold(first), fold(last)} & {"hiroshi", "tanaka"}
    assert lookalike_names("Hiroshi Tanaka", 3, "same_origin") == (names, "same_origin")  # deterministic


def test_origin_is_read_from_the_name_alone():
    assert BY_LOCALE[name_origin("Agnieszka Wróblewska").locales[0]].region == "slavic"
    assert name_origin("Agnieszka Wróblewska").gender == "female"
    assert name_origin("Takumi Hasegawa").locales == ("ja_JP",)
    assert BY_LOCALE[name_origin("Fyodor Dostoevsky").locales[0]].region == "slavic"  # no list holds either part
    assert name_origin("1234") is None


def test_common_names_that_fakers_lists_miss_are_read_in_their_own_tradition_and_never_drawn():
    """Faker's Turkish lists hold neither "Mustafa" nor "Özdemir", and its German lists hold Turkish given names, so a
    reader of Faker's lists alone read these names as German and drew German look-alikes for them. The hand-written
    common names (reader_names.json) place them; look-alikes are still drawn from Faker's lists only."""
    from benchmarks.origin_reader import configured
    from core.names.lookalikes import reader_lists

    turkish = ("Mustafa Özdemir", "Mehmet Yilmaz", "Emine Arslan")
    assert all(name_origin(n).locales == ("tr_TR",) for n in turkish), [name_origin(n) for n in turkish]
    with configured(common_names=False):
        assert all(BY_LOCALE[name_origin(n).locales[0]].region == "germanic" for n in turkish)
    assert fold("Yıldız") == fold("Yildiz") and fold("Łukasz") == fold("Lukasz") and fold("Søren") == "soren"
    faker, read = name_lists("tr_TR"), reader_lists("tr_TR")
    assert "Mustafa" in read.first["male"] and "Mustafa" not in faker.first["male"]
    drawn = {p for n in lookalike_names("Mustafa Özdemir", 40, "same_origin")[0] for p in n.split()}
    assert drawn <= {*faker.first["male"], *faker.last["male"]}, drawn - {*faker.first["male"], *faker.last["male"]}


def test_reversed_scheme_and_the_fallback():
    assert lookalike_names("Jane Doe", 2, "reversed") == (["Enaj Doe", "Jane Eod"], "reversed")
    assert lookalike_names("12 34", 2, "same_origin")[1] == "reversed"  # no letters: no origin
    assert len(same_origin_names("Hiroshi Tanaka", 10_000, name_origin("Hiroshi Tanaka"))) < 10_000  # bounded


def test_asking_for_more_names_than_an_origin_has_gives_each_possible_name_once():
    origin = name_origin("Hiroshi Tanaka")
    firsts, lasts = _pools(origin)
    possible = {f"{f} {x}" for f in firsts for x in lasts if f != "Hiroshi" and x != "Tanaka"}
    names = same_origin_names("Hiroshi Tanaka", 10_000, origin)
    assert len(names) == len(set(names)) == len(possible) and set(names) == possible
    assert names[:5] == same_origin_names("Hiroshi Tanaka", 5, origin)  # the same draws, stopped earlier


def test_transliteration():
    assert transliterate("Смирнов") == "Smirnov" and transliterate("Щукина") == "Shchukina"


def test_null_people_have_facts_that_fit_their_names():
    pids = ["P106", "P27", "P19", "P21", "P1412", "P735", "P734"]
    people = cohort(60, pids, load_catalog(), seed=3)
    assert len({p.name for p in people}) == 60
    assert people == cohort(60, pids, load_catalog(), seed=3)  # deterministic
    assert [p.name for p in people] != [p.name for p in cohort(60, pids, load_catalog(), seed=4)]  # seeded order
    written = {(r.name, r.locale, r.gender) for r in roster()}
    for p in people:
        origin = BY_LOCALE[p.locale]
        assert (p.name, p.locale, p.gender) in written  # a hand-written person, as written
        assert p.facts["P27"] == origin.country and p.facts["P1412"] == origin.language
        assert p.facts["P19"] in origin.cities and p.facts["P21"] == p.gender
        assert f"{p.facts['P735']} {p.facts['P734']}" == p.name or p.locale.startswith(("zh_", "vi_"))
        assert p.facts["P106"] in load_catalog().get("P106").pool
    catalog = load_catalog()
    for pid in ("P27", "P19", "P1412"):  # the fitting values are the catalog's pool values
        assert {p.facts[pid] for p in people} <= set(catalog.get(pid).pool)


def test_the_roster_is_hand_written_people_of_every_origin_kept_apart_from_the_benchmark_cohorts():
    """The null's people: distinct names, each origin's tradition, 2+2 per origin and writer at most, no name of
    the benchmark cohorts that validate the null (benchmarks/calibration_cohorts.json)."""
    import json
    from collections import Counter
    from pathlib import Path

    from core.names.origins import ORIGINS

    people = roster()
    assert len(people) == roster_size() == 775 and len({p.name for p in people}) == 775
    assert {p.locale for p in people} == {o.locale for o in ORIGINS}
    assert {p.gender for p in people} == {"male", "female"} and {p.writer for p in people} == {1, 2, 3, 4}
    per = Counter((p.locale, p.writer, p.gender) for p in people)
    assert max(per.values()) == 2
    assert all(sum(n for (loc, _, _), n in per.items() if loc == o.locale) >= 10 for o in ORIGINS)
    cohorts = json.loads((Path(__file__).parents[3] / "benchmarks" / "calibration_cohorts.json").read_text())
    held_out = {p["name"] for key, group in cohorts.items() if key != "note" for p in group}
    assert not held_out & {p.name for p in people}
    # Chinese and Vietnamese names are written family name first
    zh = next(p for p in cohort(roster_size(), ["P734"], load_catalog(), seed=0) if p.locale == "zh_CN")
    assert zh.name.startswith(zh.facts["P734"] + " ")


def test_a_cohort_holds_at_most_the_roster():
    with pytest.raises(ValueError, match="at most the roster's 775 people"):
        cohort(roster_size() + 1, ["P27"], load_catalog(), seed=0)


def test_every_origin_fits_the_catalog_pools():
    from core.names.origins import ORIGINS

    catalog = load_catalog()
    for origin in ORIGINS:
        assert origin.country in catalog.get("P27").pool, origin.locale
        assert origin.language in catalog.get("P1412").pool and origin.language in catalog.get("P103").pool
        assert set(origin.cities) <= set(catalog.get("P19").pool), origin.locale
        lists = name_lists(origin.locale)
        assert all(len(lists.first[g]) >= 15 and len(lists.last[g]) >= 10 for g in ("male", "female")), origin.locale


def test_a_hundred_look_ups_of_one_origin_fold_its_pools_once(monkeypatch):
    """Issue 44 (batches): a batch's 100 sampled people each folded every name of their origin's pools again
    (about 4,700 folds each: 16 s of a 2,000-person batch's request, holding the API process's GIL). Now a pool is
    folded once per origin; the names drawn are the same."""
    import unicodedata

    from core.names import lookalikes

    names = [f"Hiroshi {last}" for last in ("Tanaka", "Suzuki", "Sato", "Watanabe", "Ito")] * 20
    origin = name_origin(names[0])
    before = [same_origin_names(n, 3, origin) for n in names[:5]]  # warm: the pools folded here, once
    calls = []
    real = unicodedata.normalize
    monkeypatch.setattr(lookalikes.unicodedata, "normalize", lambda form, s: calls.append(s) or real(form, s))
    drawn = [same_origin_names(n, 3, origin) for n in names]
    firsts, lasts = _pools(origin)
    assert len(firsts) + len(lasts) > 50  # before: 100 x that many folds
    assert len(calls) <= 2 * len(names), len(calls)  # each name's own parts; was 100 x the pools' size
    assert drawn[:5] == before and all(len(d) == 3 for d in drawn)
