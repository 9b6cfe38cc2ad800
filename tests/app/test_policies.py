"""Forget-set policies describe themselves (app/policies.py): a new policy (tests/support/toy_policy.py,
Bonferroni across the export) registered in a test by one edit is in GET /forget-set's enum and description, selects
and labels records in the export (jsonl and csv), is offered by the dashboard's form and by `memaudit export`; once
unregistered it is refused everywhere again. Every registered policy is offered by each of them."""

from __future__ import annotations

import csv
import io
import json

import pytest
from markupsafe import escape

from app.policies import POLICIES, Policy
from tests.app.forget_set.test_export import create_null, create_result, jsonl_records
from tests.conftest import Api, make_key
from tests.support.stored import stored_subject_audit
from tests.support.toy_policy import NAME, TOY
from tests.support.ui import sign_in


@pytest.fixture
def stored(sqlite_env) -> tuple[str, str]:
    """(an auditor's key, its audit): occupation p = 1/101, citizenship 2/101, language 1 against their null (the
    forget-set export tests' audit, tests/app/forget_set/test_export.py)."""
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.settings import get_settings
    from tests.app.forget_set.test_export import FINGERPRINT

    key = make_key("auditor")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), key).key_id
        summary = {"scoring": {"fingerprint": FINGERPRINT}, "lookalikes": "reversed"}
        subject, audit = stored_subject_audit(s, key_id, "Ada Lovelace", {"P106", "P27", "P1412"}, summary=summary)
        s.flush()
        ranking = ["mathematician", "writer", "poet"]
        create_result(s, audit, subject, "P106", ["mathematician"], ranking, share=1.0, strict=True, z=2.5)
        citizenship = ["United Kingdom", "France"]
        create_result(s, audit, subject, "P27", ["United Kingdom"], citizenship, share=0.25, strict=False, z=0.4)
        create_result(s, audit, subject, "P1412", ["English"], ["French", "English"], share=0.0, strict=False, z=-1)
        create_null(s, audit, ["P106", "P27", "P1412"])
        return key, audit.id


def policy_parameter(api: Api) -> dict:
    operation = api.client.app.openapi()["paths"]["/forget-set"]["get"]
    return next(p for p in operation["parameters"] if p["name"] == "policy")


def properties(api: Api, aid: str, **params) -> list[str]:
    r = api.get("/forget-set", params={"audit_id": aid, **params})
    assert r.status_code == 200, r.text
    return [row["property"] for row in jsonl_records(r.text)]


def test_a_policy_registered_in_a_test_is_in_the_api_the_export_the_dashboard_and_the_cli(stored, capsys):
    from fastapi.testclient import TestClient

    from app.cli import main
    from app.main import create_app

    key, aid = stored
    refused = Api(key).get("/forget-set", params={"audit_id": aid, "policy": NAME})
    assert refused.status_code == 422 and [d["field"] for d in refused.json()["detail"]] == ["policy"]

    with POLICIES.registered(TOY):  # the one edit
        api = Api(key)
        parameter = policy_parameter(api)
        assert parameter["schema"]["enum"] == ["pvalue", "bh", "lenient", "strict", "share", NAME]
        assert TOY.description in parameter["description"]
        # m = 3 facts: Bonferroni at max_p 0.05 keeps p <= 0.0167 (occupation); BH at q = 0.05 keeps citizenship too
        assert properties(api, aid, policy=NAME, max_p=0.05) == ["P106"]
        assert properties(api, aid, policy="bh", q=0.05) == ["P106", "P27"]
        assert properties(api, aid, policy=NAME) == []  # 0.01 / 3 < 1/101
        [record] = jsonl_records(api.get("/forget-set", params={"audit_id": aid, "policy": NAME, "max_p": 0.05}).text)
        assert record["policy"] == "bonferroni(max_p=0.05): p<=0.01667"
        assert record["p_value"] == pytest.approx(1 / 101)
        # its rate on the null, each null fact against the other 99: the one at share 0.5 has p = 1/100 <= 0.0167
        assert (record["policy_fpr"]["k"], record["policy_fpr"]["n"]) == (1, 100)
        table = api.get("/forget-set", params={"audit_id": aid, "policy": NAME, "max_p": 0.05, "format": "csv"})
        assert [row["policy"] for row in csv.DictReader(io.StringIO(table.text))] == [record["policy"]]

        with TestClient(create_app()) as browser:
            assert sign_in(browser, key).status_code == 303
            page = browser.get("/ui/forget-set", params={"policy": NAME, "max_p": 0.05})
            assert page.status_code == 200, page.text
            assert f'<option selected title="{escape(TOY.description)}' in page.text
            assert '<strong id="record-count">1</strong>' in page.text

        with pytest.raises(SystemExit) as shown:
            main(["export", "--help"])
        assert shown.value.code == 0 and NAME in capsys.readouterr().out
        # the CLI takes no max_p: one property in scope (m = 1) keeps p <= 0.01
        assert main(["export", "--policy", NAME, "--audit-id", aid, "--property", "P106"]) == 0
        *lines, end = capsys.readouterr().out.splitlines()
        assert json.loads(end) == {"_end": {"records": 1}}
        assert [json.loads(line)["policy"] for line in lines] == ["bonferroni(max_p=0.01): p<=0.01"]

    assert NAME not in POLICIES
    assert Api(key).get("/forget-set", params={"audit_id": aid, "policy": NAME}).status_code == 422
    with pytest.raises(SystemExit) as refused_cli:
        main(["export", "--policy", NAME])
    assert refused_cli.value.code == 2


def test_every_registered_policy_is_offered_by_the_api_the_dashboard_and_the_cli(stored, capsys):
    from fastapi.testclient import TestClient

    from app.cli import build_parser
    from app.main import create_app

    key, _ = stored
    assert policy_parameter(Api(key))["schema"]["enum"] == list(POLICIES)
    export = build_parser("export")._subparsers._group_actions[0].choices["export"]
    assert next(a for a in export._actions if a.dest == "policy").choices == list(POLICIES)
    with TestClient(create_app()) as browser:
        sign_in(browser, key)
        page = browser.get("/ui/forget-set").text
    for policy in POLICIES.values():
        assert f">{policy.name}</option>" in page and f'title="{escape(policy.description)}' in page


def test_a_policy_is_registered_once_and_says_what_it_needs(sqlite_env):
    with pytest.raises(ValueError, match="registered twice"):
        POLICIES.registered(POLICIES["bh"]).__enter__()
    assert list(POLICIES) == ["pvalue", "bh", "lenient", "strict", "share"]
    share: Policy = POLICIES["share"]
    assert share.missing({"min_share": None}) == ("min_share", "0 to 1") and share.missing({"min_share": 0.5}) is None
    assert POLICIES["pvalue"].p_values and POLICIES["bh"].p_values and not share.p_values


def test_a_per_fact_policy_registered_once_gets_its_rate_in_every_facts_calibration(stored):
    """A fact's ``calibration.fpr`` lists each registered policy whose selection of one fact does not depend on the
    export: a policy registered by one edit gets its entry there, an export-wide one (the toy Bonferroni) does not."""
    key, aid = stored
    every_template = Policy(
        name="every_template",
        description="retrievable by every template (a copy of strict)",
        control="no error control",
        rate=lambda null, f, _: null.rate(lambda s: s.strict),
        prefilter=lambda result, _: result.strict.is_(True),
    )

    def fprs() -> list[dict]:
        r = Api(key).get(f"/audits/{aid}/facts")
        assert r.status_code == 200, r.text
        return [f["calibration"]["fpr"] for f in r.json()["facts"] if f["calibration"]["status"] == "ready"]

    before = fprs()
    assert before and all({"pvalue", "lenient", "strict", "share"} <= set(f) for f in before), before
    assert all("every_template" not in f and NAME not in f for f in before)
    with POLICIES.registered(every_template), POLICIES.registered(TOY):
        during = fprs()
    assert [f["every_template"] for f in during] == [f["strict"] for f in before], during
    assert all(NAME not in f for f in during), "an export-wide threshold has no per-fact rate"
    assert all("every_template" not in f for f in fprs())
