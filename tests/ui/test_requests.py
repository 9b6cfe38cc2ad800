"""The officer's queue and a request's reply letter in chromium (issue 43), against the live API, Postgres and a
real RQ worker: a request received 40 days ago reads overdue, a fresh one due in a month, an answered one closed;
the fresh one's audit runs on the worker, its forget set is delivered to a registered recipient, and the letter
(reached from the queue) lists each fact with the API's verdict, says once what was sent to whom, names the
authority, and downloads as one HTML file. A regulator reads the queue; a pipeline key does not."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tests.conftest import wait_for
from tests.ui.conftest import Stack, shoot, sign_in, trained_person

VERDICT = re.compile(r'data-model="([^"]+)" data-property="([^"]+)" data-verdict="([^"]+)"')


def _request(api, days_ago: int, identity: str = "pending") -> dict:  # noqa: ANN001
    person = trained_person()
    facts = [{"property": p, "value": v} for p, values in person["facts"].items() for v in values]
    received = (datetime.now(UTC) - timedelta(days=days_ago)).isoformat()
    body = {"subject": {"name": person["name"], "facts": facts}, "rights": ["access", "erasure"]}
    made = api.post(
        "/requests", json=body | {"models": ["groundtruth-tiny"], "identity_check": identity, "received_at": received}
    )
    assert made.status_code == 201, made.text
    return made.json()


def test_the_queue_and_the_letter(stack: Stack, browser, tmp_path) -> None:  # noqa: ANN001
    api = stack.client("auditor")
    late, fresh = _request(api, 40), _request(api, 0, "verified")
    refused = _request(api, 3)
    assert api.post(f"/requests/{refused['id']}/refusal", json={"reason": "The person withdrew it."}).is_success
    [audit] = api.post(f"/requests/{fresh['id']}/audits", json={}).json()["audits"]
    assert wait_for(api, audit["audit_id"], timeout=600)["status"] == "succeeded"
    recipient = api.post("/recipients", json={"name": "unlearning-eu-1", "kind": "unlearning_pipeline"}).json()
    sent = api.post(
        f"/requests/{fresh['id']}/deliveries",
        json={"recipient_id": recipient["id"], "model": "groundtruth-tiny", "policy": "lenient"},
    )
    assert sent.status_code == 201, sent.text

    page = sign_in(browser, stack, stack.keys["auditor"], "/ui/requests")
    rows = page.locator("table.requests tbody tr")
    assert rows.count() == 3
    assert page.locator(f'tr[data-request="{late["id"]}"] .deadline').inner_text() == "overdue"
    assert page.locator(f'tr[data-request="{fresh["id"]}"]').get_attribute("data-state") == "delivered"
    left = api.get(f"/requests/{fresh['id']}").json()["days_left"]  # 29 or 30: the month's days, less the time passed
    assert (
        left >= 28 and page.locator(f'tr[data-request="{fresh["id"]}"] .deadline').inner_text() == f"due in {left} days"
    )
    assert page.locator(f'tr[data-request="{refused["id"]}"] .deadline').inner_text() == "closed"
    assert page.locator(f'tr[data-request="{late["id"]}"]').get_attribute("data-state") == "received"
    shoot(page, stack, "requests")

    page.click(f'tr[data-request="{fresh["id"]}"] a')
    page.wait_for_selector("ul.verdicts")
    facts = api.get(f"/audits/{audit['audit_id']}/facts").json()["facts"]
    expected = {
        ("groundtruth-tiny", f["property"]): "not yet known"
        if f["calibration"]["status"] != "ready"
        else {True: "found", False: "not found"}[f["calibration"]["memorized"]]
        for f in facts
    }
    shown = {(m, p): v for m, p, v in VERDICT.findall(page.content())}
    assert shown == expected and len(shown) >= 3
    words = page.inner_text("main")
    assert words.count(" was sent to ") == 1 and "unlearning-eu-1" in words
    assert "data protection authority" in words
    shoot(page, stack, "request-reply")
    with page.expect_download() as download:
        page.click("text=Download this letter (HTML)")
    path = tmp_path / "reply.html"
    download.value.save_as(path)
    assert {(m, p): v for m, p, v in VERDICT.findall(path.read_text())} == expected

    regulator = sign_in(browser, stack, stack.keys["regulator"], "/ui/requests")
    assert regulator.locator("table.requests tbody tr").count() == 3
    assert stack.client("pipeline").get("/requests").status_code == 403
    assert stack.client("other_auditor").get(f"/requests/{fresh['id']}").status_code == 404
