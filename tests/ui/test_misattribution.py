"""The person's page says what the model asserts wrongly about them (issue 42): in a real browser, a subject audit
whose religion is misattributed beyond chance (a stored result judged against a stored null: p = 1/101) shows the
false value, the true one, one example sentence with the person's name and the false value, that the property is a
special category of personal data, and what the person can ask for (rectification, GDPR Art. 16); an audit with
nothing misattributed shows no such section. Where the false value is the true value of another stored subject of
the same owner sharing a name part, the page says the model seems to confuse the person with namesakes (another
principal's subject never counts). The regulator's list and the audit's verdict count misattributions beside
memorized facts."""

from __future__ import annotations

import pytest

from core.catalog import load_catalog, split_template
from tests.support.misattributed import FINGERPRINT, stored_answers, stored_null, stored_result
from tests.support.stored import stored_subject_audit
from tests.ui.conftest import Stack, goto_settled, shoot, sign_in

pytestmark = pytest.mark.slow
NAME = "Wyllora Yarrowby"


def namesake(stack: Stack, role: str, name: str) -> None:
    """A stored subject of ``role``'s key whose religion is the value the model asserts (Islam)."""
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.db.models import Fact
    from app.settings import get_settings

    with session_scope() as s:
        key_id = authenticate(s, get_settings(), stack.keys[role]).key_id
        subject, _ = stored_subject_audit(s, key_id, name, {"P140"})
        subject.facts.append(Fact(property_id="P140", value="Islam", source="request"))


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


def asked(stack: Stack) -> str:
    """A subject audit in mode generation whose answers name Islam, not Buddhism, 6 times in 10 (beyond the null)."""
    from app.auth.keys import authenticate
    from app.db.engine import session_scope
    from app.settings import get_settings

    with session_scope() as s:
        key_id = authenticate(s, get_settings(), stack.keys["auditor"]).key_id
        summary = {"scoring": {"fingerprint": FINGERPRINT, "mode": "generation"}, "lookalikes": "reversed"}
        subject, audit = stored_subject_audit(s, key_id, "Lumera Gorrowby", {"P140"}, summary=summary)
        s.flush()
        stored_answers(s, audit, subject, "P140", "Buddhism", "Islam", said=6, statistic=0.6)
        stored_null(s, audit, ["P140"])
        return audit.id


def test_the_persons_page_says_what_the_model_asserts_wrongly(stack: Stack, browser) -> None:  # noqa: ANN001
    audit_id = stored(stack, misattributed=True)
    namesake(stack, "other_auditor", "Gostrel Yarrowby")  # another principal's subject: never compared
    namesake(stack, "auditor", "Wyllora Yarrowby")  # the very same name: another record of the person, not a namesake
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
    assert section.locator(".namesake").count() == 0, text  # no namesake of this owner says Islam
    assert "1 misattributed" in page.locator("h2").first.inner_text()
    namesake(stack, "auditor", "Saphrel Yarrowby")  # the same owner, a shared family name, Islam: measured
    goto_settled(page, page.url)  # not reload(): the page may be reloading itself
    sentence = page.locator("section.misattributions .namesake").inner_text()
    assert "The model seems to confuse this person with others who share the name" in sentence
    assert "Saphrel" not in page.content()  # no other person's name reaches this person's reader
    shoot(page, stack, "misattribution")
    page.context.close()

    regulator = sign_in(browser, stack, stack.keys["regulator"], "/ui/audits")  # the regulator's view counts both
    row = regulator.locator("#audit-rows tr", has=regulator.locator(f'a[href$="/audits/{audit_id}"]'))
    counts = " ".join(row.locator(".verdict-counts").inner_text().split())
    assert counts.startswith("0 memorized / 2") and "1 misattributed" in counts, counts
    regulator.context.close()

    said = sign_in(browser, stack, stack.keys["auditor"], f"/ui/audits/{asked(stack)}")  # mode generation
    text = " ".join(said.locator("section.misattributions").inner_text().split())
    assert "says Islam in 60 % of its answers, not the true value Buddhism" in text, text
    example = "".join(split_template(load_catalog().get("P140").baseline, "Lumera Gorrowby", "Islam"))
    assert said.locator("section.misattributions q.example").inner_text() == example
    said.context.close()

    clean = sign_in(browser, stack, stack.keys["auditor"], f"/ui/audits/{stored(stack, misattributed=False)}")
    assert clean.locator("section.misattributions").count() == 0
    heading = clean.locator("h2").first.inner_text()
    assert heading.startswith("Verdict:") and "0 misattributed" in heading, heading
    clean.context.close()
