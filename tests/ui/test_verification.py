"""The dashboard's verification pages in chromium (they replace /ui/compare): an auditor starts a verification from
the form (before: groundtruth-tiny, after: the same weights as an hf: path), follows it to its audit page and reads
each fact's status with both p-values and the context probe; the list shows it with its counts; a bad form names
the field and echoes nothing; a regulator reads the list but gets no form."""

from __future__ import annotations

import hashlib
import json
import time

from playwright.sync_api import expect

from app.verification.service import name_parts
from tests.conftest import wait_for
from tests.ui.conftest import GROUNDTRUTH_DIR, MANIFEST, Stack, goto_settled, shoot, sign_in, trained_person


def _audited(stack: Stack, person: dict | None = None) -> tuple[int, int]:
    """A trained person audited on groundtruth-tiny through the API, contextualized canaries included (the
    verification's context probe): (subject id, facts)."""
    person = person or trained_person()
    facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
    subject = {"name": person["name"], "facts": facts}
    body = {"kind": "subject", "model": "groundtruth-tiny", "subject": subject, "options": {"context": True}}
    api = stack.client("auditor")
    audit = api.post("/audits", json=body).json()
    assert wait_for(api, audit["id"], timeout=300)["status"] == "succeeded"
    return audit["subject_id"], len(person["facts"])


def test_a_verification_is_started_followed_and_read_in_the_browser(stack: Stack, browser) -> None:  # noqa: ANN001
    subject_id, n_facts = _audited(stack)
    forgotten = name_parts(trained_person()["name"])
    neighbour = next(p for p in json.loads(MANIFEST.read_text())["trained"][1:] if name_parts(p["name"]) & forgotten)
    _audited(stack, neighbour)  # shares a name part: the form's name neighbours find them
    after = f"hf:{GROUNDTRUTH_DIR}"  # the same weights under another name: a fake unlearning, cheaply
    delivered = stack.client("auditor").get("/forget-set", params={"format": "tofu", "policy": "lenient"})
    assert delivered.status_code == 200, delivered.text
    page = sign_in(browser, stack, stack.keys["auditor"], "/ui/compare")
    sha = hashlib.sha256(delivered.content).hexdigest()  # the form lists the auditor's exports by their file's hash
    deadline = time.monotonic() + 15  # the export's entry is appended once its last byte was handed over
    while page.locator("table.exports").count() == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        page.reload()
    assert sha in page.inner_text("table.exports"), page.inner_text("main")
    assert page.locator("h1").inner_text() == "Did the forgetting work?"
    page.fill("#before", "groundtruth-tiny")
    page.fill("#after", after)
    page.fill("#subject_ids", "not-a-number")
    page.click("form.verify-form button[type=submit]")
    alert = page.locator("[role=alert]").inner_text()
    assert "people.subject_ids" in alert and "not-a-number" not in alert, alert
    page.fill("#export_sha256", "0" * 64)  # no export of this auditor delivered such a file
    page.click("form.verify-form button[type=submit]")
    assert "fill one of" in page.locator("[role=alert]").inner_text()  # and subject ids too: which one is meant?
    page.fill("#subject_ids", "")
    page.click("form.verify-form button[type=submit]")
    alert = page.locator("[role=alert]").inner_text()
    assert "people.export_sha256" in alert, alert
    page.fill("#export_sha256", "")
    page.fill("#subject_ids", str(subject_id))
    page.fill("#name_neighbours", "5")
    page.fill("#relearn", str(subject_id))  # the relearning probe, on the weights a name-scoped unlearning moves
    page.select_option("#relearn_scope", "subject")
    page.click("form.verify-form button[type=submit]")
    page.wait_for_url("**/ui/audits/*")
    audit_id = page.url.rstrip("/").split("/")[-1]
    relearning = stack.client("auditor").get(f"/audits/{audit_id}").json()["options"]["relearning"]
    assert relearning["subject_ids"] == [subject_id] and relearning["scope"] == "subject", relearning
    assert wait_for(stack.client("auditor"), audit_id, timeout=600)["status"] == "succeeded"
    goto_settled(page, page.url)  # not reload(): the page may be reloading itself
    rows = page.locator("table.verification-facts tbody tr")
    # the neighbour's facts too; auto-waiting: a page that was still following the audit may render its table anew
    expect(rows).to_have_count(n_facts + len(neighbour["facts"]), timeout=15_000)
    near = page.locator("table.verification-summary small.name-neighbours").inner_text()
    assert "people: 1)" in near and "): 0/" in near, near  # the same weights over-forget no one
    statuses = {s.strip().split("\n")[0] for s in page.locator("td.status strong").all_inner_texts()}
    assert statuses <= {"removed", "still retrievable", "inconclusive"} and statuses, statuses
    assert "removed" not in statuses, "identical weights cannot have forgotten anything"
    assert page.locator("table.verification-summary").count() == 1
    context = page.locator("table.verification-summary td.context").inner_text()
    assert f"of {n_facts} facts" in context and "removed yet given back in context: 0" in context, context
    assert "In context (before → after)" in page.inner_text("table.verification-facts thead")
    assert trained_person()["name"] in page.inner_text("table.verification-facts")
    shoot(page, stack, "verification")

    # the relearning probe, run (the same weights: on the forget set, the name rows, 2 steps): its row names how
    relearn = {"subject_ids": [subject_id], "texts": "forget_set", "scope": "subject", "steps": 2}
    body = {
        "kind": "verification",
        "model": after,
        "before": "groundtruth-tiny",
        "people": {"subject_ids": [subject_id]},
        "options": {"relearning": relearn},
    }
    probed = stack.client("auditor").post("/audits", json=body)
    assert probed.status_code == 202, probed.text
    assert wait_for(stack.client("auditor"), probed.json()["id"], timeout=600)["status"] == "succeeded"
    page.goto(f"/ui/audits/{probed.json()['id']}")
    how = page.locator("table.verification-summary td.relearning").inner_text()
    assert "(2 steps on forget set, subject weights, lr 0.03)" in how and "relearned: no removed fact" in how, how
    assert "After relearning" in page.inner_text("table.verification-facts thead")

    page.goto("/ui/compare")
    link = page.locator(f"a.verification-link[href$='{audit_id}']")
    assert link.count() == 1
    assert f"groundtruth-tiny → {after}" in page.inner_text("table.verifications")
    shoot(page, stack, "verifications")
    page.context.close()

    other = sign_in(browser, stack, stack.keys["other_auditor"], "/ui/compare")  # lists only its own exports
    assert other.locator("form.verify-form").count() == 1 and sha not in other.inner_text("main")
    other.context.close()

    regulator = sign_in(browser, stack, stack.keys["regulator"], "/ui/compare")
    assert regulator.locator(f"a.verification-link[href$='{audit_id}']").count() == 1
    assert regulator.locator("form.verify-form").count() == 0, "a regulator reads, submits nothing"
    regulator.context.close()
