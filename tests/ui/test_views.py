"""The regulator's view in chromium: whom and what at a glance. A batch of three people (two the ground-truth model
was trained on, one it never saw) and one single audit by another auditor; nulls large enough for a p-value of
0.01 on a property whose null uses pseudo-truths. The audits list filtered by verdict names the right people for
each role; the batch page shows progress, the cohort beside the null (tables and a chart whose labels are not
clipped) and each person's verdict; the submit form redirects (a refresh posts nothing) and explains its options;
a null's page says what a null is."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.conftest import wait_for
from tests.ui.conftest import Stack, assert_no_label_clipped, shoot, sign_in

MODEL = "groundtruth-tiny"
# A null with 120 facts per property: with pseudo-truths (occupation) three fictitious people give them, so a
# p-value can reach 1/121 < 0.01; the other properties' nulls stay at three people (p ≥ 0.25: never memorized).
# Its jobs of ~1,000 sentences (half the default) alternate with the batch's audits on the one worker: the batch
# ends with 11 of the null's 15 jobs still to run (the order of the queues, not the machine's speed, decides that).
STACK_ENV = {
    "MEMAUDIT_NULL_MIN_PEOPLE": "3",
    "MEMAUDIT_NULL_MAX_PEOPLE": "3",
    "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "120",
    "MEMAUDIT_NULL_JOB_SENTENCES": "1000",
    # the worker is paused while the test reads the pending verdicts (seconds): its job's lease outlives that pause
    "MEMAUDIT_LEASE_TTL_SECONDS": "300",
}
# every template, 20 counterfactuals (at 10 no trained person's fact reached p ≤ 0.01), reversed-letter look-alikes
OPTIONS = {"counterfactuals": 20, "paraphrases": None, "lookalikes": "reversed"}


def person(group: str, i: int) -> dict:
    import json

    from tests.ui.conftest import MANIFEST

    return json.loads(MANIFEST.read_text())[group][i]


def facts_of(p: dict) -> list[dict]:
    return [{"property": pid, "value": v} for pid, values in p["facts"].items() for v in values]


def verdicts(api, audit_id: str) -> list:  # noqa: ANN001
    """Each fact's default-policy verdict as the API says it (True, False, or None while its null runs)."""
    return [(f.get("calibration") or {}).get("memorized") for f in api.get(f"/audits/{audit_id}/facts").json()["facts"]]


@pytest.fixture(scope="module")
def cohort(stack: Stack, browser) -> Iterator[dict]:  # noqa: ANN001
    auditor, other, admin = stack.client("auditor"), stack.client("other_auditor"), stack.client("admin")
    people = [person("trained", 0), person("trained", 1), person("held_out", 0)]
    roster = [{"name": p["name"], "facts": facts_of(p)} for p in people]
    created = auditor.post("/batches", json={"model": MODEL, "options": OPTIONS, "people": roster})
    assert created.status_code == 202, created.text
    single_person = person("trained", 2)
    single = other.post(
        "/audits",
        json={
            "kind": "subject",
            "model": MODEL,
            "options": OPTIONS,
            "subject": {"name": single_person["name"], "facts": facts_of(single_person)},
        },
    ).json()
    batch_id = created.json()["id"]
    deadline = time.monotonic() + 600
    assert wait_for(other, single["id"], timeout=300)["status"] == "succeeded"  # an interactive audit: first
    while auditor.get(f"/batches/{batch_id}").json()["status"] != "finished":
        assert time.monotonic() < deadline, "the batch did not finish"
        time.sleep(0.2)
    with stack.worker_paused():  # the nulls run behind the audits: what they have not done stays undone meanwhile
        ids = [a["id"] for a in auditor.get(f"/batches/{batch_id}/audits").json()["items"]]
        first = ids[0]
        assert None in verdicts(admin, first)  # the verdicts wait for the nulls
        page = sign_in(browser, stack, stack.keys["admin"], f"/ui/audits/{first}")
        pending = {
            "cells": page.locator("td.verdict .pending").count(),
            "links": [a.get_attribute("href") for a in page.locator("td.verdict a.null-link").all()],
            "text": page.locator("td.verdict").first.inner_text(),
        }
        page.context.close()
    names = dict(zip(ids, [p["name"] for p in people], strict=True))  # roster order
    names[single["id"]] = single_person["name"]
    while any(v is None for audit_id in names for v in verdicts(admin, audit_id)):  # until every null has run
        assert time.monotonic() < deadline + 900, "the nulls did not finish"
        time.sleep(2)
    memorized = {a for a in names if any(verdicts(admin, a))}
    yield {
        "batch": batch_id,
        "names": names,
        "memorized": memorized,
        "mine": set(ids),
        "single": single["id"],
        "token": single["subject_token"],
        "pending": pending,
    }


def listed_names(page) -> set[str]:  # noqa: ANN001
    return set(page.locator("#audit-rows .subject-name").all_inner_texts())


def test_the_list_filtered_by_memorized_names_the_right_people_for_each_role(
    stack: Stack, browser, cohort: dict
) -> None:  # noqa: ANN001
    names, memorized = cohort["names"], cohort["memorized"]
    assert memorized, "the trained people: some fact memorized at p ≤ 0.01"
    assert memorized != set(names), "the held-out person: nothing memorized"
    expected = {
        "auditor": {names[a] for a in memorized & cohort["mine"]},
        "regulator": {names[a] for a in memorized},
    }
    for role, want in expected.items():
        page = sign_in(browser, stack, stack.keys[role])
        page.select_option("select[name=verdict]", "memorized")  # the list's own filter form
        page.click("form.filters button")
        assert "verdict=memorized" in page.url
        assert listed_names(page) == want, role
        for row in page.locator("#audit-rows tr").all():  # every row says what was found: n memorized / total
            counts = row.locator(".verdict-counts").inner_text()
            assert int(counts.split()[0]) >= 1 and " / " in counts, counts
        if role == "regulator":
            shoot(page, stack, "audits-memorized")
        page.goto("/ui/audits?verdict=none")
        assert (
            listed_names(page)
            == ({names[a] for a in cohort["mine"]} if role == "auditor" else set(names.values())) - want
        ), role
        page.context.close()
    own = sign_in(browser, stack, cohort["token"])  # the data subject of the single audit: their own audit only
    own.goto("/ui/audits")
    assert listed_names(own) == {names[cohort["single"]]}
    own.goto("/ui/audits?verdict=memorized")
    assert listed_names(own) == ({names[cohort["single"]]} if cohort["single"] in memorized else set())
    own.goto("/ui/audits?verdict=none")
    assert listed_names(own) == ({names[cohort["single"]]} if cohort["single"] not in memorized else set())
    own.context.close()


def test_the_batch_page_reports_the_cohort_and_each_persons_verdict(stack: Stack, browser, cohort: dict) -> None:  # noqa: ANN001
    admin = stack.client("admin")
    page = sign_in(browser, stack, stack.keys["auditor"], "/ui/batches")
    page.click(f"#batches a[href='/ui/batches/{cohort['batch']}']")
    assert page.url.endswith(f"/ui/batches/{cohort['batch']}")
    assert "3 / 3 audits: 3 succeeded" in page.inner_text("#batch-progress")
    report = admin.get(f"/batches/{cohort['batch']}/report").json()["cohorts"][MODEL]
    table = page.locator("table.cohort-table")
    row = table.locator("tr", has_text="Some template ranks the truth first")  # plain words first (issue 45)
    assert row.locator("th abbr").inner_text() == "rank1_any"  # the term second
    assert not any(h.startswith(("M̄", "z̄", "HM=0", "rank1")) for h in table.locator("th[scope=row]").all_inner_texts())
    lenient = row.locator("td").all_inner_texts()
    assert (
        lenient[0] == f"{100 * report['cohort']['rank1_any']:.0f}%"
        and lenient[1] == f"{100 * report['null']['rank1_any']:.0f}%"
    )
    per_property = page.locator("table.per-property tbody tr")
    assert per_property.count() == 1 + len(report["per_property"])  # all facts, then each property
    assert_no_label_clipped(page, "batch")
    people = page.locator("#batch-people tbody tr")
    assert people.count() == 3
    for i in range(3):
        row = people.nth(i)
        audit_id = row.locator("a").get_attribute("href").rsplit("/", 1)[1]
        assert row.locator(".subject-name").inner_text() == cohort["names"][audit_id]
        want = sum(v is True for v in verdicts(admin, audit_id))
        assert row.locator(".verdict-counts strong").inner_text() == str(want)
    page.set_viewport_size({"width": 1280, "height": 1500})  # progress, the cohort table and its chart in one shot
    shoot(page, stack, "batch")
    page.locator("#batch-people a").first.click()  # each person links to their audit
    assert "/ui/audits/" in page.url and page.locator("td.verdict").count() >= 1
    page.context.close()
    other = sign_in(browser, stack, stack.keys["other_auditor"])
    assert other.goto(f"/ui/batches/{cohort['batch']}").status == 404  # another key's batch, as the API
    other.context.close()


def test_submitting_redirects_so_a_refresh_posts_nothing(stack: Stack, browser, cohort: dict) -> None:  # noqa: ANN001
    api = stack.client("auditor")
    page = sign_in(browser, stack, stack.keys["auditor"], "/ui/submit")
    hint = page.inner_text("#hint-paraphrases")
    assert "blank" in hint and "all" in hint  # the schema's description, the API's null said as the form's blank
    assert page.locator("select#option_lookalikes option").count() == 2  # choices, not a free text field
    before = api.get("/audits").json()["total"]
    p = person("held_out", 1)
    # the cohort's model: the form's default (smollm2-135m) would load a second model and compute its null first
    page.fill("#model", MODEL)
    page.fill("#name", p["name"])
    page.fill("#facts", "\n".join(f"{pid} = {v}" for pid, values in p["facts"].items() for v in values))
    page.fill("input[name=option_counterfactuals]", "20")
    page.fill("input[name=option_paraphrases]", "1")
    page.click("form.stack button[type=submit]")
    page.wait_for_selector("#audit-link")
    assert "/ui/submitted/" in page.url and page.locator("code.token").count() == 1  # the token, shown once
    audit_id = page.inner_text("#audit-link").strip()
    page.reload()
    assert api.get("/audits").json()["total"] == before + 1  # the refresh did not submit again
    assert page.locator("code.token").count() == 0 and page.locator("#token-shown").count() == 1
    wait_for(api, audit_id, timeout=240)
    page.context.close()


def test_a_null_explains_itself_and_pending_verdicts_link_to_it(stack: Stack, browser, cohort: dict) -> None:  # noqa: ANN001
    admin = stack.client("admin")
    audit_id = next(iter(cohort["memorized"]))
    facts = admin.get(f"/audits/{audit_id}/facts").json()["facts"]
    null_id = next(f["calibration"]["null_audit_id"] for f in facts if f.get("calibration"))
    pending = cohort["pending"]  # the audit's page while its nulls ran: each verdict pending, linked to its null
    assert pending["cells"] == len(facts) and pending["links"], pending
    assert all(link.startswith("/ui/audits/") for link in pending["links"]) and " / " in pending["text"], pending
    page = sign_in(browser, stack, stack.keys["regulator"], f"/ui/audits/{null_id}")
    about = page.inner_text("#about")
    assert "fictitious people" in about and about.count(". ") + about.endswith(".") == 2  # two sentences
    assert "Facts about fictitious people measured" in page.inner_text("table.kv")  # not the raw key first
    shoot(page, stack, "null")
    page.goto(f"/ui/audits/{audit_id}")
    assert page.locator("td.verdict").first.inner_text().strip().startswith(("memorized", "not found"))
    headers = page.locator("table.verdicts thead th").all_inner_texts()  # plain words, then the term (issue 45)
    assert any(h.startswith("main wording") and h.endswith("base") for h in headers), headers
    lead = " ".join(page.inner_text("p.lead").split())  # a "not found" says what it is worth: the miss rate
    assert "not found is not found to be absent" in lead and "false-alarm rate" in lead, lead
    # citizenship, birthplace, languages: the p-value says it is optimistic for ordinary names (docs/measures.md)
    caveats = [f for f in facts if (f.get("calibration") or {}).get("caveat")]
    assert caveats and {f["property"] for f in caveats} <= {"P27", "P19", "P1412"}, facts
    assert page.locator("small.caveat").count() == len(caveats)
    assert "ordinary names" in (page.locator("small.caveat").first.get_attribute("title") or "")
    page.click("details.details-stats summary")  # lenient, strict, z̄* with their null rates, behind a click
    assert page.locator("details.details-stats tbody tr").count() == len(facts)
    page.context.close()
