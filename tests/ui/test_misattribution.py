"""The person's page says what the model asserts wrongly about them (issue 42): in a real browser, a subject audit
whose religion is misattributed beyond chance (a stored result judged against a stored null: p = 1/101) shows the
false value, the true one, one example sentence with the person's name and the false value, that the property is a
special category of personal data, and what the person can ask for (rectification, GDPR Art. 16); an audit with
nothing misattributed shows no such section."""

from __future__ import annotations

import pytest

from core.catalog import load_catalog, split_template
from tests.support.misattributed import FINGERPRINT, stored_null, stored_result
from tests.support.stored import stored_subject_audit
from tests.ui.conftest import Stack, shoot, sign_in

pytestmark = pytest.mark.slow
NAME = "Wyllora Yarrowby"


def stored(stack: Stack, misattributed: bool) -> str:
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.settings import get_settings

    with session_scope() as s:
        key_id = authenticate(s, get_settings(), stack.keys["auditor"]).key_id
        summary = {"scoring": {"fingerprint": FINGERPRINT}, "lookalikes": "reversed"}
        subject, audit = stored_subject_audit(s, key_id, NAME, {"P140", "P106"}, summary=summary)
        s.flush()
        stored_result(s, audit, subject, "P140", "Buddhism", "Islam", 2.0 if misattributed else -1.5)
        stored_result(s, audit, subject, "P106", "tailor", "baker", -1.5)
        stored_null(s, audit, ["P140", "P106"])
        return audit.id


def test_the_persons_page_says_what_the_model_asserts_wrongly(stack: Stack, browser) -> None:  # noqa: ANN001
    audit_id = stored(stack, misattributed=True)
    page = sign_in(browser, stack, stack.keys["auditor"], f"/ui/audits/{audit_id}")
    section = page.locator("section.misattributions")
    assert section.count() == 1
    text = section.inner_text()
    assert "What the model asserts wrongly: 1 fact" in text, text
    assert "prefers Islam to the true value Buddhism" in " ".join(text.split()), text
    example = "".join(split_template(load_catalog().get("P140").baseline, NAME, "Islam"))
    assert section.locator("q.example").inner_text() == example
    assert "special category of personal data (religious or philosophical beliefs)" in text
    assert "right to rectification, GDPR Art. 16" in text and "memaudit export --rectification" in text
    assert "occupation" not in text  # the occupation's false value is no better than chance
    shoot(page, stack, "misattribution")
    page.context.close()

    clean = sign_in(browser, stack, stack.keys["auditor"], f"/ui/audits/{stored(stack, misattributed=False)}")
    assert clean.locator("section.misattributions").count() == 0
    assert clean.locator("h2").first.inner_text().startswith("Verdict:")
    clean.context.close()
