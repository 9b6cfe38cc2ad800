"""Issue 43 end to end on groundtruth-tiny, through the embedded service (HTTP API -> worker thread -> results ->
nulls -> verdicts): a person's request is received (identity checked), their facts audited, the forget set delivered
to a registered recipient (an unlearning pipeline), unlearned by the project's reference script
(workers/unlearning/reference.py at its defaults: gradient ascent on the name's embedding
rows), verified on the unlearned model, and answered; the reply letter says what the API says.
Each artefact is made once (one audit, one delivery, one verification, one answer); the evidence record verifies
offline and holds one entry per step and not the person's name. The before model's null is the shipped one; the
unlearned model's is computed at 100 null facts per property (the smallest whose p-values reach 0.01)."""

from __future__ import annotations

import json
import re
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.cli import main as cli
from tests.conftest import Api, _reset_caches, end_embedded_service, make_key, wait_for
from tests.support.ui import sign_in

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "workers" / "groundtruth" / "manifest.json"
GROUNDTRUTH = ROOT / "workers" / "groundtruth" / "model"
BEFORE, AFTER = "groundtruth-tiny", "groundtruth-request-unlearned"
AFTER_LINE = re.compile(r'data-after-property="([^"]+)" data-status="([^"]+)"')
VERDICT = re.compile(r'data-model="([^"]+)" data-property="([^"]+)" data-verdict="([^"]+)"')


def test_a_request_from_intake_to_reply(sqlite_url: str, tmp_path: Path) -> None:
    import torch

    from workers.unlearning.reference import unlearn

    torch.set_num_threads(1)
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        db = tmp_path / "embedded.sqlite3"
        shutil.copyfile(sqlite_url.removeprefix("sqlite:///"), db)
        models = {
            BEFORE: {"path": str(GROUNDTRUTH), "description": "the ground-truth model"},
            AFTER: {"path": str(tmp_path / "unlearned"), "description": "groundtruth-tiny, unlearned"},
        }
        for key, value in (
            ("MEMAUDIT_DATABASE_URL", f"sqlite:///{db}"),
            ("MEMAUDIT_ENV", "test"),
            ("MEMAUDIT_MODELS", json.dumps(models)),
            ("MEMAUDIT_EVIDENCE_KEY_FILE", str(tmp_path / "evidence.pem")),
            ("MEMAUDIT_NULL_JOB_SENTENCES", "10000"),
        ):
            mp.setenv(key, value)
        mp.delenv("MEMAUDIT_REDIS_URL", raising=False)
        _reset_caches()
        token = make_key("auditor")
        api, regulator = Api(token), Api(make_key("regulator"))
        manifest = json.loads(MANIFEST.read_text())
        who, untouched = manifest["trained"][0], manifest["trained"][1]
        flow(api, regulator, token, who, untouched, tmp_path, unlearn, mp)
        print(f"\nrequest flow: {time.monotonic() - started:.0f} s")
        end_embedded_service()


def _facts(person: dict) -> list[dict]:
    return [{"property": p, "value": v} for p, values in person["facts"].items() for v in values]


def flow(api, regulator, token, who, untouched, tmp_path, unlearn, mp) -> None:  # noqa: ANN001, PLR0913
    received = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    body = {"subject": {"name": who["name"], "facts": _facts(who)}, "rights": ["access", "erasure"]}
    made = api.post("/requests", json=body | {"models": [BEFORE], "received_at": received})
    assert made.status_code == 201, made.text
    rid = made.json()["id"]
    assert api.post(f"/requests/{rid}/identity", json={"status": "verified"}).json()["state"] == "identity_checked"
    [audit] = api.post(f"/requests/{rid}/audits", json={}).json()["audits"]
    other = api.post(
        "/audits",
        json={"kind": "subject", "model": BEFORE, "subject": {"name": untouched["name"], "facts": _facts(untouched)}},
    ).json()
    for audit_id in (audit["audit_id"], other["id"]):
        assert wait_for(api, audit_id, timeout=1800)["status"] == "succeeded"
    assert api.get(f"/requests/{rid}").json()["state"] == "audited"

    recipient = api.post(
        "/recipients", json={"name": "unlearning-eu-1", "kind": "unlearning_pipeline", "models": [BEFORE]}
    ).json()
    delivery = api.post(f"/requests/{rid}/deliveries", json={"recipient_id": recipient["id"], "model": BEFORE}).json()
    assert delivery["records"] >= 1, delivery
    file = api.get(f"/requests/{rid}/deliveries/{delivery['id']}/file").text
    records = [json.loads(line) for line in file.splitlines() if '"_end"' not in line]
    unlearn(GROUNDTRUTH, records, tmp_path / "unlearned")  # the recipient's pipeline, on the file received

    mp.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "100")
    from app.settings import get_settings

    get_settings.cache_clear()
    verification = api.post(
        "/audits",
        json={
            "kind": "verification",
            "model": AFTER,
            "before": BEFORE,
            "people": {"forget_set": records},
            "locality": {"subject_ids": [other["subject_id"]]},
        },
    )
    assert verification.status_code == 202, verification.text
    assert wait_for(api, verification.json()["id"], timeout=3600)["status"] == "succeeded"
    verified = api.post(f"/requests/{rid}/verification", json={"audit_id": verification.json()["id"]})
    assert verified.status_code == 200 and verified.json()["state"] == "verified", verified.text
    page = api.get(f"/audits/{verification.json()['id']}/verification", params={"page_size": 200}).json()
    after = {f["property"]: f["status"] for f in page["facts"] if f["target"] and f["role"] == "forgotten"}
    print(f"\nafter the reference unlearning: {after}")
    assert after and "removed" in after.values(), f"the reference unlearning removed nothing: {after}"
    assert verified.json()["verification"]["forgotten"] is all(s == "removed" for s in after.values())
    answered = api.post(f"/requests/{rid}/answer")
    assert answered.status_code == 200 and answered.json()["state"] == "answered", answered.text

    check_letter(api, token, rid, audit["audit_id"], after)
    check_evidence(regulator, tmp_path, who["name"])


def check_letter(api, token: str, rid: str, audit_id: str, after: dict[str, str]) -> None:  # noqa: ANN001
    facts = api.get(f"/audits/{audit_id}/facts").json()["facts"]
    expected = {
        (BEFORE, f["property"]): {True: "found", False: "not found"}[f["calibration"]["memorized"]] for f in facts
    }
    sign_in(api.client, token, f"/ui/requests/{rid}/reply")
    page = api.client.get(f"/ui/requests/{rid}/reply.html").text
    assert {(m, p): v for m, p, v in VERDICT.findall(page)} == expected
    assert page.count(" was sent to ") == 1 and "the model no longer gives it away" in page
    assert dict(AFTER_LINE.findall(page)) == after, "the letter's check after is the verification's, fact by fact"
    state = api.get(f"/requests/{rid}").json()
    assert len(state["audits"]) == 1 and len(state["deliveries"]) == 1 and state["verification"], state


def check_evidence(regulator, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    chain = regulator.get("/evidence")
    (tmp_path / "evidence.jsonl").write_text(chain.text)
    (tmp_path / "public.pem").write_text(regulator.get("/evidence/public-key").json()["pem"])
    assert (
        cli(["evidence", "verify", str(tmp_path / "evidence.jsonl"), "--public-key", str(tmp_path / "public.pem")]) == 0
    )
    kinds = [json.loads(json.loads(line)["payload"])["kind"] for line in chain.text.splitlines() if '"payload"' in line]
    steps = [k for k in kinds if k.startswith("request_")]
    assert steps == [
        "request_received",
        "request_identity_checked",
        "request_delivered",
        "request_verified",
        "request_answered",
    ], kinds
    assert "forget_set_export" not in kinds, "the delivery is no export"
    assert name not in chain.text and not any(part in chain.text for part in name.split())
