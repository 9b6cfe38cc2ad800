"""A request's reply letter (issue 43), on Postgres with the subject audit run in-process at the service's default
configuration, whose null for groundtruth-tiny is shipped (so every verdict is ready): the letter's every verdict
equals the API's (GET /audits/{id}/facts, calibration.memorized: a golden test); its forget set delivered to a
registered recipient is the only thing it says was sent, with the file's SHA-256 the delivery's; the downloadable
file holds the same verdicts; the officer's queue lists the request; the evidence record holds no name."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from app.db.engine import session_scope
from app.db.models.evidence import EvidenceEntry
from tests.app.evidence.test_evidence import evidence_pg  # noqa: F401 (a fixture)
from tests.conftest import make_key
from tests.support.faults import person
from tests.support.ui import sign_in

VERDICT = re.compile(r'data-model="([^"]+)" data-property="([^"]+)" data-verdict="([^"]+)"')


def test_the_letter_says_what_the_api_says(evidence_pg, api_factory) -> None:  # noqa: F811
    from workers.jobs.subject import run

    token = make_key("auditor")
    api = api_factory(key=token)
    who = person(0)
    facts = [{"property": p, "value": v} for p, values in who["facts"].items() for v in values]
    received = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    body = {"subject": {"name": who["name"], "facts": facts}, "rights": ["access", "erasure"]}
    body |= {"models": ["groundtruth-tiny"], "identity_check": "verified", "received_at": received}
    made = api.post("/requests", json=body)
    assert made.status_code == 201, made.text
    rid = made.json()["id"]
    started = api.post(f"/requests/{rid}/audits", json={})
    assert started.status_code == 202, started.text
    [audit] = started.json()["audits"]
    run(audit["audit_id"])
    assert api.get(f"/requests/{rid}").json()["state"] == "audited"

    api_facts = api.get(f"/audits/{audit['audit_id']}/facts").json()["facts"]
    expected = {
        ("groundtruth-tiny", f["property"]): {True: "found", False: "not found"}[f["calibration"]["memorized"]]
        for f in api_facts
        if f["calibration"]["status"] == "ready"
    }
    assert len(expected) == len(api_facts) >= 3 and "found" in expected.values(), api_facts

    recipient = api.post("/recipients", json={"name": "unlearning-eu-1", "kind": "unlearning_pipeline"}).json()
    delivered = api.post(
        f"/requests/{rid}/deliveries", json={"recipient_id": recipient["id"], "model": "groundtruth-tiny"}
    )
    assert delivered.status_code == 201, delivered.text
    delivery = delivered.json()
    file = api.get(f"/requests/{rid}/deliveries/{delivery['id']}/file")
    assert hashlib.sha256(file.content).hexdigest() == delivery["sha256"] and delivery["records"] >= 1
    assert api.get(f"/requests/{rid}").json()["state"] == "delivered"

    sign_in(api.client, token, f"/ui/requests/{rid}/reply")
    for path in (f"/ui/requests/{rid}/reply", f"/ui/requests/{rid}/reply.html"):
        page = api.client.get(path)
        assert page.status_code == 200, page.text
        shown = {(m, p): v for m, p, v in VERDICT.findall(page.text)}
        assert shown == expected, (path, shown, expected)
        assert page.text.count(" was sent to ") == 1 and "unlearning-eu-1" in page.text
        assert "data protection authority" in page.text
    queue = api.client.get("/ui/requests")
    assert f'data-request="{rid}" data-state="delivered"' in queue.text
    person_page = api.client.get(f"/ui/audits/{audit['audit_id']}/reply")
    assert "was sent to unlearning-eu-1 to be removed" in person_page.text, (
        "a delivery is what the person reads as sent"
    )

    with session_scope() as s:
        rows = list(s.scalars(select(EvidenceEntry).order_by(EvidenceEntry.seq)))
    kinds = [r.kind for r in rows]
    assert kinds == ["request_received", "request_identity_checked", "audit_finished", "request_delivered"], kinds
    text = " ".join(r.payload for r in rows)
    assert who["name"] not in text and not any(part in text for part in who["name"].split())

    # The person is erased: the request keeps its dates, states and the delivery's hash (what an authority checks),
    # and loses the name, the facts and the delivered file's contents.
    from app.db.models.requests import Delivery, PersonRequest

    subject_id = api.get(f"/audits/{audit['audit_id']}").json()["subject_id"]
    erased = api.delete(f"/subjects/{subject_id}")
    assert erased.status_code == 200 and erased.json()["requests_scrubbed"] == 1, erased.text
    after = api.get(f"/requests/{rid}")
    assert after.status_code == 200 and who["name"] not in after.text, after.text
    assert api.get(f"/requests/{rid}/deliveries/{delivery['id']}/file").content == b""
    with session_scope() as s:
        stored = [r.subject_name + repr(r.facts) for r in s.scalars(select(PersonRequest))]
        stored += [d.content + d.sha256 for d in s.scalars(select(Delivery))]
    assert stored and not any(who["name"] in row or who["name"].split()[-1] in row for row in stored), stored
    assert delivery["sha256"] in " ".join(stored), "the delivery's hash stays: what was sent can still be checked"
    letter = api.client.get(f"/ui/requests/{rid}/reply")
    assert letter.status_code == 200 and who["name"] not in letter.text, "the letter after the erasure names no one"
