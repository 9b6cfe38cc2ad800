"""The verification kind's contract through the service, small and quick (a tiny null: its p-values are coarse, the
statuses are not what is checked here; tests/e2e/test_verification.py measures those): bad input is a 422 naming the
field and echoing nothing; a verification of the same weights under another name finds every after p-value equal to
the before one and removes nothing; its results hold no name or value; the person's evidence entry is written and
read by their page; the forget-set export names the verification, and a verification can name the export by its
file's SHA-256; erasing the person deletes its verification rows
and the cached scores of every sentence the verification scored (held-out templates included)."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from app.settings import GROUNDTRUTH_DIR
from tests.conftest import wait_for

MANIFEST = GROUNDTRUTH_DIR.parent / "manifest.json"
SMALL_NULL = {"MEMAUDIT_NULL_MIN_PEOPLE": "2", "MEMAUDIT_NULL_MAX_PEOPLE": "3", "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "3"}


@pytest.fixture
def audited(sqlite_env, api_factory, monkeypatch):  # noqa: ANN001, ANN201
    from app.settings import get_settings

    for k, v in SMALL_NULL.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    api = api_factory("auditor")
    people = json.loads(MANIFEST.read_text())["trained"][:2]
    audits = []
    for i, person in enumerate(people):
        facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
        if i == 0:  # an occupation in and out of the pool: judged on its pool value too, before and after alike
            facts.append({"property": "P106", "value": "lighthouse keeper"})
        body = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": person["name"], "facts": facts}}
        audits.append(api.post("/audits", json=body).json())
    for audit in audits:
        assert wait_for(api, audit["id"], timeout=600)["status"] == "succeeded"
    return {"api": api, "people": people, "audits": audits, "factory": api_factory}


def body(audited: dict, **people) -> dict:  # noqa: ANN003
    forgotten, untouched = (a["subject_id"] for a in audited["audits"])
    return {
        "kind": "verification",
        "model": f"hf:{GROUNDTRUTH_DIR}",  # the same weights under another name
        "before": "groundtruth-tiny",
        "people": people or {"subject_ids": [forgotten]},
        "locality": {"subject_ids": [untouched]},
    }


def test_bad_input_names_the_field_and_echoes_nothing(audited) -> None:  # noqa: ANN001
    api, name = audited["api"], audited["people"][0]["name"]
    forgotten = audited["audits"][0]["subject_id"]
    cases = {
        "people": body(audited) | {"people": {"subject_ids": [forgotten], "batch_id": "x"}},
        "people.subject_ids[0]": body(audited, subject_ids=[10**9]),
        "people.forget_set[0].audit_id": body(
            audited, forget_set=[{"subject_id": forgotten, "property": "P106", "audit_id": "f" * 32, "subject": name}]
        ),
        "before": body(audited) | {"before": "no-such-model"},
        "model": body(audited) | {"model": "groundtruth-tiny"},
        "locality.name_neighbours": body(audited) | {"locality": {"name_neighbours": 10**6}},
        "options.relearning.subject_ids[0]": body(audited)
        | {"options": {"relearning": {"subject_ids": [audited["audits"][1]["subject_id"]]}}},
    }
    for field, sent in cases.items():
        answer = api.post("/audits", json=sent)
        assert answer.status_code == 422, (field, answer.text)
        assert name not in answer.text and "f" * 32 not in answer.text, answer.text
        fields = [d.get("field") or ".".join(str(p) for p in d.get("loc", [])) for d in answer.json()["detail"]]
        assert any(field in f for f in fields), (field, answer.text)
    other = audited["factory"]("auditor")  # another auditor's person reads as absent
    answer = other.post("/audits", json=body(audited))
    assert answer.status_code == 422 and "people.subject_ids[0]" in answer.text


def test_same_weights_remove_nothing_and_erasure_forgets_what_was_scored(audited) -> None:  # noqa: ANN001
    from app.db.engine import session_scope
    from app.db.models import NllCache, Subject
    from app.db.models.verification import VerificationPerson
    from app.nll_cache import repository as cache
    from app.subjects.held_out import held_out_sentences
    from app.subjects.service import _sentence_hashes

    api, person = audited["api"], audited["people"][0]
    forgotten = audited["audits"][0]["subject_id"]
    created = api.post("/audits", json=body(audited))
    assert created.status_code == 202, created.text
    audit_id = created.json()["id"]
    assert wait_for(api, audit_id, timeout=900)["status"] == "succeeded"
    page = api.get(f"/audits/{audit_id}/verification").json()
    assert page["total"] == len(page["facts"]) == sum(len(p["facts"]) for p in audited["people"])
    for f in page["facts"]:
        assert f["after"]["p_value"] == f["before"]["p_value"], f  # same weights, same configuration: same scores
        assert f["status"] != "removed" and f["paired_p"] == 1.0, f
        assert f["held_out"]["templates"] and not set(f["held_out"]["templates"]) & {0, 1, 2}, f
        assert f["held_out"]["before_retrieved"] == f["held_out"]["after_retrieved"], f
        assert f["context"] is None, "the before audits had no contextualized canaries: no context probe"
    assert "context" not in page["summary"]
    text = json.dumps(page)
    assert person["name"] not in text and not any(v in text for vs in person["facts"].values() for v in vs)
    assert page["summary"]["over_forgetting"] is None or page["summary"]["over_forgetting"]["k"] == 0

    exported = api.get("/forget-set", params={"audit_id": audited["audits"][0]["id"], "policy": "lenient"})
    records = [json.loads(line) for line in exported.text.splitlines()[:-1]]
    assert records and all(r["verification"]["verified_by"] == audit_id for r in records)

    admin = audited["factory"]("admin")
    chain = [json.loads(line) for line in admin.get("/evidence").text.splitlines()[:-1]]
    ours = [json.loads(e["payload"]) for e in chain if json.loads(e["payload"])["kind"] == "verification"]
    assert len(ours) == 1 and ours[0]["audit_id"] == audit_id, ours  # one per forgotten person
    assert ours[0]["body"]["forgotten"] is False and person["name"] not in json.dumps(ours)

    with session_scope() as s:
        subject = s.get(Subject, forgotten)
        held = {cache.text_hash(t) for t in held_out_sentences(s, subject)}
        hashes = _sentence_hashes(s, subject)
        cached = s.scalar(select(func.count()).select_from(NllCache).where(NllCache.text_hash.in_(list(held))))
    assert held and held <= hashes, "erasure forgets the held-out templates' sentences too"
    assert cached >= len(held), "scored and cached (the same weights share one fingerprint: once)"
    assert api.delete(f"/subjects/{forgotten}").status_code == 200
    with session_scope() as s:
        rows = select(func.count()).select_from(VerificationPerson).where(VerificationPerson.subject_id == forgotten)
        assert s.scalar(rows) == 0
        assert s.scalar(select(func.count()).select_from(NllCache).where(NllCache.text_hash.in_(list(hashes)))) == 0
    after = api.get(f"/audits/{audit_id}/verification").json()
    assert {f["subject_id"] for f in after["facts"]} == {audited["audits"][1]["subject_id"]}


def test_the_relearning_probe_says_unavailable_for_a_model_it_cannot_train(audited) -> None:  # noqa: ANN001
    api = audited["api"]
    forgotten = audited["audits"][0]["subject_id"]
    sent = body(audited) | {
        "model": "knowledge-free",  # no weights: nothing to fine-tune
        "options": {"relearning": {"subject_ids": [forgotten]}, "held_out": False},
    }
    created = api.post("/audits", json=sent)
    assert created.status_code == 202, created.text
    assert wait_for(api, created.json()["id"], timeout=900)["status"] == "succeeded"
    page = api.get(f"/audits/{created.json()['id']}/verification").json()
    probe = page["summary"]["relearning"]
    assert probe["status"] == "unavailable" and "transformers directory" in probe["reason"], probe
    assert all(f["relearning"] is None and f["held_out"] is None for f in page["facts"])


def test_the_context_probe_redoes_the_before_audits_contextualized_canaries(audited, capsys) -> None:  # noqa: ANN001
    """Before audits with contextualized canaries (the person's other facts, then the baseline): a verification
    redoes each on the after model. The same weights give each fact's canary the same outcome as before, and the
    summary counts them (tests/e2e/test_verification.py: an unlearned model's counts)."""
    api = audited["api"]
    ids = []
    for person in audited["people"]:
        facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
        sent = {
            "kind": "subject",
            "model": "groundtruth-tiny",
            "subject": {"name": person["name"], "facts": facts},
            "options": {"context": True},
        }
        audit = api.post("/audits", json=sent).json()
        assert wait_for(api, audit["id"], timeout=600)["status"] == "succeeded"
        ids.append(audit["subject_id"])
    created = api.post("/audits", json=body(audited, subject_ids=ids[:1]) | {"locality": {"subject_ids": ids[1:]}})
    assert created.status_code == 202, created.text
    assert wait_for(api, created.json()["id"], timeout=900)["status"] == "succeeded"
    page = api.get(f"/audits/{created.json()['id']}/verification").json()
    before = {}
    for audit_id in {f["before"]["audit_id"] for f in page["facts"]}:
        for fact in api.get(f"/audits/{audit_id}/facts").json()["facts"]:
            context = [c for c in fact["canaries"] if c["kind"] == "context"]
            before[(audit_id, fact["property"])] = context[0]["memorized"]
    assert page["facts"] and all(f["context"] is not None for f in page["facts"]), page["facts"]
    for f in page["facts"]:
        assert f["context"]["before_retrieved"] == before[(f["before"]["audit_id"], f["property"])], f
        assert f["context"]["after_retrieved"] == f["context"]["before_retrieved"], f  # same weights
        assert 0 < f["context"]["chance"] < 1, f
    targets = [f for f in page["facts"] if f["target"]]
    summary = page["summary"]["context"]
    assert summary["facts"] == len(targets), summary
    assert (
        summary["before_retrieved"]
        == summary["after_retrieved"]
        == sum(f["context"]["after_retrieved"] for f in targets)
    ), summary
    assert summary["removed_but_retrieved"] == 0, summary
    assert summary["before_retrieved"] > 0, "trained people: some canary ranks a true value first in context"
    from app.cli.verify import print_result  # what `memaudit verify` prints of this answer

    print_result(page)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("in context"))
    n = summary["before_retrieved"]
    assert f"rank 1 before {n}, after {n} of {len(targets)}" in line and line.endswith("in context 0"), line


def test_name_neighbours_are_found_among_the_callers_people_only(audited) -> None:  # noqa: ANN001
    """locality.name_neighbours adds the people the caller may see, audited on the before model, whose name shares a
    part with a forgotten person's: not the caller's other people, not another auditor's namesakes."""
    from app.verification.service import name_parts

    api, people = audited["api"], json.loads(MANIFEST.read_text())["trained"]
    forgotten = people[0]
    near = [p for p in people[1:] if name_parts(p["name"]) & name_parts(forgotten["name"])]
    assert len(near) >= 3 and not name_parts(people[1]["name"]) & name_parts(forgotten["name"])

    def audit(client, person: dict) -> int:  # noqa: ANN001
        facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
        sent = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": person["name"], "facts": facts}}
        created = client.post("/audits", json=sent).json()
        assert wait_for(client, created["id"], timeout=600)["status"] == "succeeded"
        return created["subject_id"]

    ours = [audit(api, p) for p in near[:2]]
    audit(audited["factory"]("auditor"), near[2])  # another auditor's namesake: never read, never added
    sent = body(audited) | {"locality": {"name_neighbours": 10}}
    created = api.post("/audits", json=sent)
    assert created.status_code == 202, created.text
    assert wait_for(api, created.json()["id"], timeout=900)["status"] == "succeeded"
    page = api.get(f"/audits/{created.json()['id']}/verification", params={"page_size": 200}).json()
    locality = {f["subject_id"] for f in page["facts"] if f["role"] == "locality"}
    assert locality == set(ours), (locality, ours)  # people[1] (audited, no shared part) is not among them
    summary = page["summary"]
    assert summary["people"] == {"forgotten": 1, "locality": 2, "name_neighbours": 2}, summary["people"]
    group = summary["over_forgetting_by_group"]["name_neighbours"]
    assert group is None or group["k"] == 0, group  # the same weights forget no one
    text = json.dumps(page)
    assert not any(p["name"] in text for p in near), "ids only"


def test_a_tofu_export_is_verified_by_its_sha256_with_its_templates_held_out(audited) -> None:  # noqa: ANN001
    """people.export_sha256 names a forget-set export by its file's SHA-256: the facts come from the export's evidence
    entry (a tofu export's templates with them, so the held-out probe skips what it exposed); another auditor's
    export reads as absent; a hash no export delivered, or an export whose person was erased since, is a 422 naming
    the field."""
    import hashlib

    from app.db.engine import session_scope
    from app.db.models.evidence import EvidenceEntry
    from app.db.models.verification import VerificationPerson

    api = audited["api"]
    exported = api.get("/forget-set", params={"format": "tofu", "policy": "lenient"})
    assert exported.status_code == 200, exported.text
    records = [json.loads(line) for line in exported.text.splitlines()]
    sha = hashlib.sha256(exported.content).hexdigest()
    deadline = time.monotonic() + 30  # the entry is appended once the last byte is handed over
    while time.monotonic() < deadline:
        with session_scope() as s:
            if s.scalar(select(func.count()).select_from(EvidenceEntry).where(EvidenceEntry.payload.contains(sha))):
                break
        time.sleep(0.2)
    answer = audited["factory"]("auditor").post("/audits", json=body(audited, export_sha256=sha))
    assert answer.status_code == 422 and "people.export_sha256" in answer.text, answer.text
    answer = api.post("/audits", json=body(audited, export_sha256="0" * 64))
    assert answer.status_code == 422 and "people.export_sha256" in answer.text, answer.text

    created = api.post("/audits", json=body(audited, export_sha256=sha))
    assert created.status_code == 202, created.text
    audit_id = created.json()["id"]
    with session_scope() as s:
        people = s.scalars(select(VerificationPerson).where(VerificationPerson.audit_id == audit_id)).all()
        exposed = {(p.subject_id, pid): t for p in people for pid, t in (p.exposed or {}).items()}
    assert exposed == {(r["subject_id"], r["property"]): r["templates"] for r in records}, exposed
    assert wait_for(api, audit_id, timeout=900)["status"] == "succeeded"
    page = api.get(f"/audits/{audit_id}/verification", params={"page_size": 200}).json()
    assert page["export"]["sha256"] == sha
    assert {(f["subject_id"], f["property"]) for f in page["facts"] if f["target"]} == set(exposed)
    for f in page["facts"]:
        if f["target"] and f["held_out"]:
            assert not set(f["held_out"]["templates"]) & set(exposed[f["subject_id"], f["property"]]), f
    # a person of the export erased since: the export can no longer be verified whole; the answer says what to send
    assert api.delete(f"/subjects/{records[0]['subject_id']}").status_code == 200
    answer = api.post("/audits", json=body(audited, export_sha256=sha))
    assert answer.status_code == 422 and "people.export_sha256" in answer.text and "erased" in answer.text, answer.text
