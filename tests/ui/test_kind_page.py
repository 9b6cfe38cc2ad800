"""A kind brings its own dashboard section (AuditKind.page): the toy kind of tests/support/toy_kind.py, registered
in a test, shows its section, with its template kept beside its code, on the audit's page; nothing in app/ui names
it. A kind without a page shows status and options only."""

from __future__ import annotations

import dataclasses

from fastapi.testclient import TestClient

from app.kinds import KINDS
from app.main import create_app
from tests.conftest import Api, make_key, wait_for
from tests.support.toy_kind import KIND as TOY
from tests.support.ui import sign_in


def test_a_kinds_own_page_section_is_shown_on_its_audit_page(sqlite_env):
    for kind, shown in ((TOY, True), (dataclasses.replace(TOY, page=None), False)):
        key = make_key("auditor")
        browser = TestClient(create_app(KINDS.with_kind(kind)))
        api = Api(key)
        api.client = browser
        created = api.post("/audits", json={"kind": "toy", "texts": ["one two <b>three</b>"], "options": {"repeat": 2}})
        assert created.status_code == 202, created.text
        assert wait_for(api, created.json()["id"], timeout=60)["status"] == "succeeded"
        assert sign_in(browser, key).status_code == 303
        page = browser.get(f"/ui/audits/{created.json()['id']}")
        assert page.status_code == 200
        assert ('id="toy-words">6 words in 1 texts' in page.text) is shown, page.text
        assert ("A toy audit counts the words of its texts." in page.text) is shown
        assert "<b>three</b>" not in page.text  # the kind's template is autoescaped like every page
