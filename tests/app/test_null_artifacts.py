"""Null artifacts (memaudit.null/1) through the service, on the knowledge-free negative control (no weights: its
nulls take seconds): a null computed for a subject audit is exported (admins only), holds no personal data, and
imported into another database it calibrates the same subject audit to the same p-values without any null being
computed there; importing again is idempotent; bad files are refused with the field named and change nothing; the
command line's `nulls export|import` go through the same API. And the shipped null: it validates, holds fictitious
people only, carries the key the CLI's default configuration has today, and a submission that needs it imports it
instead of queueing a computation (`source: shipped`)."""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select

from tests.conftest import Api, _reset_caches, make_key, wait_for

MODEL = "knowledge-free"
NAME = "Quirinus Abernathy-Vasquez"  # the audited subject: must never appear in a null's file
PLACE = "Little Snorington on the Wold"  # a birthplace outside every pool: must never appear either
FACTS = [
    {"property": "P27", "value": "Portugal"},
    {"property": "P106", "value": "cartographer"},
    {"property": "P19", "value": PLACE},
]
OPTIONS = {"paraphrases": 1, "counterfactuals": 8}


@pytest.fixture
def small_nulls(sqlite_env, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "8")
    monkeypatch.setenv("MEMAUDIT_NULL_MIN_PEOPLE", "2")
    _reset_caches()
    yield sqlite_env
    _reset_caches()


def use_database(path: Path, template: str, monkeypatch) -> None:
    """Switch this process to a fresh copy of the migrated database (another deployment)."""
    shutil.copyfile(template.removeprefix("sqlite:///"), path)
    monkeypatch.setenv("MEMAUDIT_DATABASE_URL", f"sqlite:///{path}")
    _reset_caches()


def audit_subject(api: Api) -> tuple[str, dict]:
    body = {"kind": "subject", "model": MODEL, "subject": {"name": NAME, "facts": FACTS}, "options": OPTIONS}
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    assert wait_for(api, r.json()["id"], timeout=300)["status"] == "succeeded"
    return r.json()["id"], api.get(f"/audits/{r.json()['id']}/facts").json()


def calibrated(api: Api, audit_id: str) -> dict:
    """The subject audit's facts once every null it needs has succeeded."""
    facts = api.get(f"/audits/{audit_id}/facts").json()
    for null_id in {n["null_audit_id"] for n in facts["calibration"]["nulls"] if n["null_audit_id"]}:
        assert wait_for(api, null_id, timeout=300)["status"] == "succeeded"
    return api.get(f"/audits/{audit_id}/facts").json()


def counts() -> tuple[int, int, int]:
    from app.db.engine import session_scope
    from app.db.models import Audit, NullDistribution, NullFact

    with session_scope() as s:
        return tuple(
            s.scalar(select(func.count()).select_from(t))
            for t in (NullDistribution, NullFact, Audit.__table__)  # type: ignore[return-value]
        )


def test_export_import_round_trip_calibrates_alike_without_computing(small_nulls, sqlite_url, tmp_path, monkeypatch):

    admin = Api(make_key("admin"))
    audit_id, _ = audit_subject(admin)
    first = calibrated(admin, audit_id)
    null_ids = {n["null_audit_id"] for n in first["calibration"]["nulls"]}
    assert len(null_ids) == 1 and all(n["source"] == "computed" for n in first["calibration"]["nulls"])
    null_id = null_ids.pop()
    p_values = {f["property"]: f["calibration"]["p_value"] for f in first["facts"]}
    assert all(f["calibration"]["status"] in ("ready", "uncalibrated") for f in first["facts"]), first["facts"]

    for role in ("auditor", "regulator", "pipeline"):  # admins only
        r = Api(make_key(role)).get(f"/nulls/{null_id}/artifact")
        assert r.status_code == 403, (role, r.text)
    r = admin.get(f"/nulls/{null_id}/artifact")
    assert r.status_code == 200 and r.headers["content-type"] == "application/gzip", r.text
    data = r.content
    assert admin.get(f"/nulls/{null_id}/artifact").content == data, "the same null, the same bytes"
    assert admin.get(f"/nulls/{audit_id}/artifact").status_code == 404, "a subject audit is not a null"

    # no personal data: the subject's name and values never, the null's names are its cohort's (from the file's seed)
    text = gzip.decompress(data).decode()
    assert NAME not in text and PLACE not in text and "Quirinus" not in text
    doc = json.loads(text)
    assert doc["format"] == "memaudit.null/1" and doc["model"]["name"] == MODEL
    assert_only_fictitious_names(doc)

    # another deployment: the import is a succeeded null; the same audit there computes no null and gets the same p
    use_database(tmp_path / "other.sqlite3", sqlite_url, monkeypatch)
    admin = Api(make_key("admin"))
    r = admin.post("/nulls/import", content=data, headers={"Content-Type": "application/gzip"})
    assert r.status_code == 201, r.text
    imported = r.json()["null_audit_id"]
    assert r.json()["created"] is True
    again = admin.post("/nulls/import", content=data, headers={"Content-Type": "application/gzip"})
    assert (again.status_code, again.json()) == (200, {"null_audit_id": imported, "created": False}), "idempotent"
    null = admin.get(f"/audits/{imported}").json()
    assert null["status"] == "succeeded" and null["summary"]["source"] == "imported"
    before = counts()
    audit_id, _ = audit_subject(admin)
    second = admin.get(f"/audits/{audit_id}/facts").json()
    assert counts()[:2] == before[:2], "the submission created a null although the imported one covers it"
    assert {n["null_audit_id"] for n in second["calibration"]["nulls"]} == {imported}
    assert {n["source"] for n in second["calibration"]["nulls"]} == {"imported"}
    assert {f["property"]: f["calibration"]["p_value"] for f in second["facts"]} == p_values

    # the command line: the same API in this process (the CLI's admin key)
    from app.cli import main

    out = tmp_path / "exported.null.json.gz"
    assert main(["nulls", "export", imported, "-o", str(out)]) == 0
    exported = json.loads(gzip.decompress(out.read_bytes()))
    assert {d["key"] for d in exported["distributions"]} == {d["key"] for d in doc["distributions"]}
    assert all(d["rows"] == e["rows"] for d, e in zip(doc["distributions"], exported["distributions"], strict=True))
    assert main(["nulls", "import", str(out)]) == 0
    assert counts()[:2] == before[:2], "importing a file already imported wrote rows"


def corrupt(doc: dict, how: str) -> tuple[bytes, int, str]:
    """A bad file, the status it must get, and the field the answer must name."""
    d = copy.deepcopy(doc)
    dist = d["distributions"][0]
    columns = dist["columns"]
    if how == "format":
        d["format"] = "memaudit.null/0"
        return gzip.compress(json.dumps(d).encode()), 422, "format"
    if how == "statistic":
        d["statistic"] = "share-then-z-star"
        return gzip.compress(json.dumps(d).encode()), 422, "statistic"
    if how == "generator":
        d["generator"] = "reversed-letters-0"
        return gzip.compress(json.dumps(d).encode()), 422, "generator"
    if how == "fingerprint":  # other weights than this server's audits of the model ran on
        d["model"]["fingerprint"] = "0" * 64
        return gzip.compress(json.dumps(d).encode()), 422, "model.fingerprint"
    if how == "key":
        dist["config"]["counterfactuals"] += 1
        return gzip.compress(json.dumps(d).encode()), 422, "distributions[0].key"
    if how == "shape":
        dist["rows"][3][columns.index("n_values")] = 9
        return gzip.compress(json.dumps(d).encode()), 422, "distributions[0].rows[3].n_values"
    if how == "column":
        i = columns.index("statistic")
        dist["columns"] = columns[:i] + columns[i + 1 :]
        dist["rows"] = [r[:i] + r[i + 1 :] for r in dist["rows"]]
        return gzip.compress(json.dumps(d).encode()), 422, "distributions[0].columns"
    if how == "cell":
        dist["rows"][-1][columns.index("share")] = "0.5"
        return gzip.compress(json.dumps(d).encode()), 422, f"distributions[0].rows[{len(dist['rows']) - 1}].share"
    if how == "options":
        d["options"]["paraphrases"] = "two"
        return gzip.compress(json.dumps(d).encode()), 422, "options"
    if how == "nul":  # PostgreSQL cannot store it: refused before it gets there
        dist["rows"][0][columns.index("name")] = "A\u0000B"
        return gzip.compress(json.dumps(d).encode()), 422, "distributions[0].rows[0].name"
    if how == "model":
        d["model"]["name"] = "no-such-model"
        return gzip.compress(json.dumps(d).encode()), 422, "model.name"
    if how == "truncated":
        return gzip.compress(json.dumps(d).encode())[:-200], 422, "body"
    if how == "not-json":
        return b"PK\x03\x04 not a null", 422, "body"
    if how == "bomb":  # 20 MiB of spaces in 20 kB: refused once it inflates past 16 x max_null_artifact_bytes
        return gzip.compress(b" " * (20 * 1024 * 1024), compresslevel=9), 413, "body"
    raise AssertionError(how)


BAD = ("format", "statistic", "generator", "fingerprint", "key", "shape", "column", "cell", "options", "nul", "model")


def test_bad_files_are_refused_by_field_and_change_nothing(small_nulls, monkeypatch):
    admin = Api(make_key("admin"))
    audit_id, _ = audit_subject(admin)
    facts = calibrated(admin, audit_id)
    null_id = facts["calibration"]["nulls"][0]["null_audit_id"]
    doc = json.loads(gzip.decompress(admin.get(f"/nulls/{null_id}/artifact").content))
    monkeypatch.setenv("MEMAUDIT_MAX_NULL_ARTIFACT_BYTES", str(1024 * 1024))  # inflates to 16 MiB at most
    _reset_caches()
    admin = Api(make_key("admin"))
    before = counts()
    for how in (*BAD, "truncated", "not-json", "bomb"):
        data, status, field = corrupt(doc, how)
        r = admin.post("/nulls/import", content=data, headers={"Content-Type": "application/gzip"})
        assert r.status_code == status, (how, r.text)
        detail = r.json()["detail"][0]
        assert detail["field"] == field, (how, detail)
        assert NAME not in detail["message"] and "no-such-model" not in detail["message"], (how, detail)
    assert counts() == before, "a refused file wrote something"
    r = Api(make_key("auditor")).post("/nulls/import", content=gzip.compress(json.dumps(doc).encode()))
    assert r.status_code == 403, "admins only"
    monkeypatch.setenv("MEMAUDIT_MAX_NULL_ARTIFACT_BYTES", "1000")
    _reset_caches()
    r = Api(make_key("admin")).post("/nulls/import", content=gzip.compress(json.dumps(doc).encode()))
    assert r.status_code == 413 and r.json()["detail"][0]["field"] == "body", r.text
    assert counts()[:2] == before[:2]


def test_shipped_null_validates_and_holds_fictitious_people_only():
    from app.cli.demo import PEOPLE
    from app.nulls.shipped import SHIPPED_DIR, shipped

    files = sorted(SHIPPED_DIR.glob("*.null.json.gz"))
    assert files, "no shipped null: memaudit nulls ship writes it"
    assert len(shipped()) == len(files), "a shipped file does not validate with this version: run memaudit nulls ship"
    real = {p["name"] for p in json.loads(PEOPLE.read_text())["people"]}
    for artifact in shipped():
        doc = artifact.document
        text = json.dumps(doc)
        assert not any(name in text for name in real), "a demo person's name in a shipped null"
        assert_only_fictitious_names(doc)


def test_a_submission_imports_the_shipped_null_instead_of_computing(sqlite_env):
    """The demo's configuration on the default model: ensure_nulls imports the shipped file (once) and queues
    nothing; the calibration reads it as ready, `source: shipped`."""
    from app.cli.audit import audit_options
    from app.cli.demo import PEOPLE, add_demo_command
    from app.db.engine import session_scope
    from app.db.models import Audit, NullDistribution
    from app.nulls.calibrate import Calibrator
    from app.nulls.service import ensure_nulls
    from app.nulls.shipped import shipped, weights_file
    from app.settings import get_settings
    from app.subjects.schemas import SubjectAuditOptions
    from core.names.lookalikes import READER

    settings = get_settings()
    model = settings.default_model
    assert weights_file(model, settings) is not None, f"{model}'s weights package is not installed (make install)"
    parser = argparse.ArgumentParser()
    add_demo_command(parser.add_subparsers())
    args = parser.parse_args(["demo"])  # the demo's defaults, as `make demo` runs it
    options = SubjectAuditOptions(**audit_options(args)).model_dump(mode="json")
    pids = {f["property"] for p in json.loads(PEOPLE.read_text())["people"] for f in p["facts"]}
    with session_scope() as s:
        queued = ensure_nulls(s, model, options, "same_origin", pids, settings)
        assert queued is None, "a computation was queued although a shipped null matches the demo's configuration"
        assert ensure_nulls(s, model, options, "same_origin", pids, settings) is None
        rows = list(s.scalars(select(NullDistribution).where(NullDistribution.model == model)))
        assert {r.property_id for r in rows} == pids and {r.source for r in rows} == {"shipped"}
        assert len({r.audit_id for r in rows}) == 1, "imported more than once"
        null = s.get(Audit, rows[0].audit_id)
        assert null.status == "succeeded" and null.summary["source"] == "shipped"
        assert rows[0].fingerprint in {a.fingerprint for a in shipped() if a.model == model}
        summary = {"lookalikes": "same_origin", "lookalike_reader": READER}  # as the subject job records them
        subject = Audit(kind="subject", model=model, status="succeeded", options=options, summary=summary)
        s.add(subject)
        s.flush()
        for pid in pids:
            found = Calibrator(s).resolve(subject, pid)
            assert found.status == "ready" and found.ref().source == "shipped", pid


def test_a_deployment_asking_for_another_null_size_computes_its_own(sqlite_env, monkeypatch):
    """A shipped file holds 200 null facts (people) per name-hinted property: with null_facts_per_property 100 the
    submission queues its own null for those (rolled back here, so nothing runs); occupation's pseudo-truth null is
    20 people either way (null_min_people), so the shipped one still serves it."""
    from app.cli.audit import audit_options
    from app.cli.demo import PEOPLE, add_demo_command
    from app.db.engine import session_factory
    from app.db.models import NullDistribution
    from app.nulls.service import ensure_nulls
    from app.settings import get_settings
    from app.subjects.schemas import SubjectAuditOptions

    monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "100")
    _reset_caches()
    settings = get_settings()
    parser = argparse.ArgumentParser()
    add_demo_command(parser.add_subparsers())
    options = SubjectAuditOptions(**audit_options(parser.parse_args(["demo"]))).model_dump(mode="json")
    pids = {f["property"] for p in json.loads(PEOPLE.read_text())["people"] for f in p["facts"]}
    s = session_factory()()
    try:
        assert ensure_nulls(s, settings.default_model, options, "same_origin", pids, settings) is not None
        by_source = {(r.source, r.property_id, r.people) for r in s.scalars(select(NullDistribution))}
        assert by_source == {("shipped", "P106", 20)} | {(None, p, 100) for p in pids - {"P106"}}, by_source
        # the default size again (another deployment of the same database): the rest of the file is imported, once
        monkeypatch.setenv("MEMAUDIT_NULL_FACTS_PER_PROPERTY", "200")
        _reset_caches()
        s.execute(delete(NullDistribution).where(NullDistribution.source.is_(None)))
        assert ensure_nulls(s, settings.default_model, options, "same_origin", pids, get_settings()) is None
        shipped_rows = [(r.property_id, r.people) for r in s.scalars(select(NullDistribution))]
        assert sorted(shipped_rows) == sorted([("P106", 20), *((p, 200) for p in pids - {"P106"})]), shipped_rows
    finally:
        s.rollback()
        s.close()


def assert_only_fictitious_names(doc: dict) -> None:
    """Every name in an artifact is one of the fictitious cohort its seed regenerates (no personal data)."""
    from core.catalog import load_catalog
    from core.names.fictitious import cohort

    pids = [d["property"] for d in doc["distributions"]]
    people = max(d["people"] for d in doc["distributions"])
    names = {p.name for p in cohort(people, pids, load_catalog(), doc["seed"])}
    for d in doc["distributions"]:
        at = d["columns"].index("name")
        assert {row[at] for row in d["rows"]} <= names, "a name that is not the fictitious cohort's"


def test_the_caveat_states_the_rates_measured_beside_the_shipped_null(tmp_path):
    """The calibration caveat's numbers are the ones `memaudit nulls ship` measured beside the default model's null
    (app/nulls/shipped/smollm2-135m.measured.json), not constants; that file is what the command writes from the
    benchmarks' results files today, byte for byte; and another measurement changes the caveat."""
    import re

    from app.cli import main
    from app.nulls import measured
    from app.nulls.calibrate import TYPICAL_NAMES, TYPICAL_NAMES_CAVEAT
    from app.nulls.shipped import SHIPPED_DIR

    shipped_file = SHIPPED_DIR / f"{measured.CAVEAT_MODEL}{measured.SUFFIX}"
    doc = json.loads(shipped_file.read_text())
    service, bench = doc["service"], doc["benchmark"]
    have, other = bench["origins_the_null_has"], bench["other_origins"]
    assert set(doc["properties"]) == set(TYPICAL_NAMES) and doc["model"] == measured.CAVEAT_MODEL
    stated = re.findall(r"(\d+)/(\d+) = (\d+\.\d) %", TYPICAL_NAMES_CAVEAT)
    expected = [(service["flagged_p01"], service["facts"]), (have["flagged_p01"], have["facts"])]
    expected += [(have["flagged_p05"], have["facts"])]
    assert [(int(k), int(n)) for k, n, _ in stated] == expected, TYPICAL_NAMES_CAVEAT
    assert all(float(pct) == round(100 * int(k) / int(n), 1) for k, n, pct in stated)
    assert f"({other['flagged_p01']} of {other['facts']} such facts)" in TYPICAL_NAMES_CAVEAT
    assert f"measured on {doc['model']}" in TYPICAL_NAMES_CAVEAT

    shutil.copy(SHIPPED_DIR / f"{measured.CAVEAT_MODEL}.null.json.gz", tmp_path)
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    argv = ["nulls", "ship", "--model", measured.CAVEAT_MODEL, "--measured-only", "--out", str(tmp_path)]
    assert main([*argv, "--results", str(results)]) == 0
    assert (tmp_path / shipped_file.name).read_bytes() == shipped_file.read_bytes(), "run memaudit nulls ship"

    other_run = doc | {"service": {"flagged_p01": 1, "facts": 3}}
    assert "1/3 = 33.3 % of their facts through the service" in measured.typical_names_caveat(other_run)


def test_an_adapter_model_never_takes_its_base_models_shipped_null():
    """smollm2-taught is smollm2-135m's GGUF file plus an adapter: its weights record holds the adapter's files, so
    the base model's shipped null (computed without the adapter) does not match it."""
    from app.nulls.shipped import matches, shipped, weights
    from app.settings import get_settings

    settings = get_settings()
    base, taught = weights("smollm2-135m", settings), weights("smollm2-taught", settings)
    assert base is not None and taught is not None
    assert {k: v for k, v in taught.items() if k != "adapter"} == base
    assert set(taught["adapter"]) == {"adapter_config.json", "adapter_model.safetensors"}
    base_files = [a for a in shipped() if a.model == "smollm2-135m"]
    assert base_files and all(matches(a, "smollm2-135m", settings) for a in base_files)
    assert not any(matches(a, "smollm2-taught", settings) for a in base_files)


@pytest.mark.parametrize("shipped", ["groundtruth-tiny", "smollm2-135m"])
def test_the_prefix_check_takes_every_shipped_null(shipped):
    """The shipped nulls pass the import's prefix check and carry the misattribution column; a file from before it
    (an optional column, artifact.OPTIONAL_COLUMNS: the smollm2-135m file shipped without it until 2026-11-28, and CI
    once refused its columns before reading its format) still passes. A file lacking a required column is refused."""
    import gzip

    from app.errors import InvalidInput
    from app.nulls.intake import PREFIX_BYTES, check_prefix
    from app.nulls.shipped import SHIPPED_DIR

    text = gzip.decompress((SHIPPED_DIR / f"{shipped}.null.json.gz").read_bytes())
    check_prefix(text[:PREFIX_BYTES])
    assert b'"misattribution"]' in text[:PREFIX_BYTES], "the shipped null lacks the misattribution column"
    older = text.replace(b',"misattribution"]', b"]", 1)  # the first distribution's columns, from before it
    assert older != text
    check_prefix(older[:PREFIX_BYTES])
    lacking = text.replace(b'"statistic",', b"", 1)  # the first distribution's columns without a required one
    assert lacking != text
    with pytest.raises(InvalidInput) as refused:
        check_prefix(lacking[:PREFIX_BYTES])
    assert refused.value.field == "distributions[0].columns"
