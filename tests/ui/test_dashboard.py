"""The dashboard in chromium: sign in per role, submit a subject audit on the ground-truth model and watch it
finish live, open every page kind (screenshots), download a forget set, and the security promises: 404 for another
principal's audit, CSP and cookie flags, escaped HTML in names and facts, 403 for a forged CSRF token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.ui.conftest import (
    Stack,
    assert_no_label_clipped,
    finish,
    goto_settled,
    other_kinds,
    shoot,
    sign_in,
    trained_person,
)

EVIL = "<script>window.pwned=1</script> Eve"


def submit_form(page, name: str, facts: str, model: str = "groundtruth-tiny", paraphrases: int = 2) -> tuple[str, str]:  # noqa: ANN001
    page.goto("/ui/submit")
    page.fill("#model", model)
    page.fill("#name", name)
    page.fill("#facts", facts)
    page.fill("input[name=option_paraphrases]", str(paraphrases))
    page.fill("input[name=option_counterfactuals]", "40")
    page.click("form.stack button[type=submit]")
    page.wait_for_selector("#audit-link")
    return page.inner_text("#audit-link").strip(), page.inner_text("code.token").strip()


@pytest.fixture(scope="module")
def subject(stack: Stack, browser, tmp_path_factory) -> Iterator[dict]:  # noqa: ANN001
    """The auditor submits through the form and watches the audit page (no reload by the test) until it ends."""
    person = trained_person()
    facts = "\n".join(f"{pid} = {v}" for pid, values in person["facts"].items() for v in values)
    page = sign_in(browser, stack, stack.keys["auditor"], "/ui/submit")
    shoot(page, stack, "submit")
    audit_id, token = submit_form(page, person["name"], facts)
    stack.audits = other_kinds(stack, tmp_path_factory.mktemp("catalog"))  # queued now, behind the subject audit
    page.click("text=Follow its progress")
    first_status = page.inner_text("#status")
    # no string predicates (wait_for_function): the page's CSP forbids eval, and rightly so
    page.wait_for_selector("#status.status-succeeded", timeout=240_000)
    page.wait_for_selector("table.grid", timeout=30_000)  # the page reloaded itself at the end
    yield {"id": audit_id, "token": token, "page": page, "person": person, "first_status": first_status}
    page.context.close()


def test_a_submitted_audit_is_followed_live_to_its_grid(stack: Stack, subject: dict) -> None:
    page = subject["page"]
    assert subject["first_status"] in ("queued", "running", "succeeded")
    assert page.locator("table.grid tbody tr").count() == sum(1 for _ in subject["person"]["facts"])
    assert page.locator("td.rank1").count() >= 1  # a trained person: some template ranks the truth first
    assert page.inner_text(".subject-name").startswith(subject["person"]["name"])
    shoot(page, stack, "subject-audit")
    page.locator("td.cell a").first.click()
    page.wait_for_selector("text=candidates, best first")
    assert page.locator("table.list tbody tr").count() == 41  # 40 counterfactuals and the truth (one page)
    assert page.locator("tr.truth").count() >= 1
    shoot(page, stack, "candidates")


def test_every_page_kind_renders_with_its_numbers(stack: Stack, browser, subject: dict) -> None:  # noqa: ANN001
    ids = stack.audits
    finish(stack, ids)
    page = sign_in(browser, stack, stack.keys["regulator"])
    for kind, audit_id in ids.items():
        page.goto(f"/ui/audits/{audit_id}")
        assert page.locator("svg.chart").count() >= 1, kind  # a chart, drawn from the table beside it
        assert page.locator("table.chart-data tbody tr").count() >= 2, kind
        plotted = {"capacity": (1, 2), "coverage": (5,)}.get(kind)  # the table columns each chart draws
        assert_no_label_clipped(page, kind, {0: plotted} if plotted else None)
        if kind == "coverage":  # the records reproduced, each with its prompt (opened by keyboard or click)
            prompt = page.locator("#coverage-records details").first
            prompt.locator("summary").click()
            assert prompt.locator("pre.prompt").inner_text().count("\n") >= 3  # k example lines, then the id
            page.set_viewport_size({"width": 1280, "height": 1500})  # the chart and an open prompt in one shot
            page.locator("h1").scroll_into_view_if_needed()
        shoot(page, stack, kind)
        page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/ui/audits")
    assert page.locator("#audit-rows tr").count() >= 4 and page.locator("#audit-rows progress").count() >= 4
    page.select_option("select[name=kind]", "subject")
    page.click("form.filters button")
    assert page.locator("#audit-rows tr").count() >= 1 and "kind=subject" in page.url
    assert all(k == "subject" for k in page.locator("#audit-rows td:nth-child(5)").all_inner_texts())
    page.goto("/ui/audits")
    shoot(page, stack, "audits")
    page.goto("/ui/models")
    assert "groundtruth-tiny" in page.inner_text("table")
    shoot(page, stack, "models")
    page.context.close()


def test_forget_set_preview_and_download_follow_the_roles(stack: Stack, browser, subject: dict) -> None:  # noqa: ANN001
    # one rule with GET /forget-set: a regulator sees no forget-set names or values, previewed or downloaded
    regulator = sign_in(browser, stack, stack.keys["regulator"], "/ui/forget-set?policy=lenient")
    assert regulator.locator("#record-count").count() == 0 and subject["person"]["name"] not in regulator.content()
    assert regulator.request.get("/ui/forget-set?policy=lenient").status == 403
    denied = regulator.request.get("/ui/forget-set/download?format=csv&policy=lenient")
    assert denied.status == 403
    regulator.context.close()
    auditor = sign_in(browser, stack, stack.keys["auditor"], "/ui/forget-set?policy=lenient")
    shoot(auditor, stack, "forget-set")
    with auditor.expect_download() as info:
        auditor.click(".downloads a:text('csv')")
    text = Path(info.value.path()).read_text(encoding="utf-8")
    assert text.startswith("subject_id,subject,") and subject["person"]["name"] in text
    # the default policy (p-values): records, or the facts it leaves out for want of a null said above the table
    auditor.goto("/ui/forget-set")
    pending = auditor.locator("#pending")
    assert auditor.locator("#record-count").inner_text() != "0" or pending.count() == 1, auditor.content()
    if pending.count():
        assert "pending calibration" in pending.inner_text() and "lenient" in pending.inner_text()
    auditor.context.close()


def test_each_principal_sees_what_the_api_lets_it_see(stack: Stack, browser, subject: dict) -> None:  # noqa: ANN001
    own = sign_in(browser, stack, subject["token"])  # the data subject's token
    assert own.locator("#audit-rows tr").count() == 1
    own.goto(f"/ui/audits/{subject['id']}")
    assert own.locator("table.grid").count() == 1
    # the forget set (every subject's facts) is not the data subject's to read: 403, no record shown (it was open)
    for path in ("/ui/forget-set?policy=lenient", "/ui/forget-set/download?format=csv&policy=lenient"):
        response = own.goto(path) if "download" not in path else own.request.get(path)
        assert response.status == 403, path
        assert subject["person"]["name"] not in (own.content() if "download" not in path else response.text()), path
    own.context.close()
    other = sign_in(browser, stack, stack.keys["other_auditor"], "/ui/forget-set?policy=lenient")
    assert subject["person"]["name"] not in other.content()  # an auditor reads its own key's audits only
    other.context.close()
    for role in ("other_auditor", "pipeline"):
        page = sign_in(browser, stack, stack.keys[role])
        response = page.goto(f"/ui/audits/{subject['id']}")
        assert response.status == 404 and "Not found" in page.inner_text("h1"), role
        page.context.close()
    bad = sign_in(browser, stack, "mak_nothing_here")
    assert "not valid" in bad.inner_text(".error") and "/ui/signin" in bad.url
    bad.context.close()


def test_headers_cookie_and_csrf(stack: Stack, browser, subject: dict) -> None:  # noqa: ANN001
    page = sign_in(browser, stack, stack.keys["auditor"])
    response = page.goto("/ui/audits")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "memaudit_ui"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["expires"] > 0
    # a forged or missing CSRF token: 403 and the audit is not cancelled
    grid = {
        "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
        "vocab_size": 16,
        "seq_len": 8,
        "dataset_sizes": [8],
        "seeds": [0],
        "precisions": ["fp32"],
    }
    body = {"kind": "capacity", "model": "scratch", "grid": grid, "options": {"steps": 20}}
    queued = stack.client("auditor").post("/audits", json=body).json()["id"]
    for form in ({"csrf": "forged"}, {}):
        assert page.request.post(f"/ui/audits/{queued}/cancel", form=form).status == 403
    assert stack.client("auditor").get(f"/audits/{queued}").json()["status"] != "cancelled"
    subject_id = stack.client("auditor").get(f"/audits/{subject['id']}").json()["subject_id"]
    dataset = stack.client("auditor").get(f"/audits/{stack.audits['coverage']}").json()["summary"]["dataset_id"]
    for action in (f"/ui/subjects/{subject_id}/erase", f"/ui/datasets/{dataset}/delete"):
        assert page.request.post(action, form={"csrf": "forged"}).status == 403
    assert stack.client("auditor").get(f"/audits/{subject['id']}").status_code == 200
    assert stack.client("auditor").get(f"/datasets/{dataset}").status_code == 200
    # a tampered cookie is no session: back to the sign-in page
    page.context.add_cookies([{**cookie, "value": cookie["value"][:-4] + "AAAA"}])
    page.goto("/ui/audits")
    assert "/ui/signin" in page.url
    page.context.close()


def _shown_as_text(page) -> None:  # noqa: ANN001
    assert page.inner_text(".subject-name").startswith(EVIL)
    assert page.evaluate("window.pwned") is None and page.locator("img[src=x]").count() == 0
    assert re.search(r"&lt;script&gt;window\.pwned", page.content())


def test_html_in_names_and_facts_is_shown_as_text(stack: Stack, browser) -> None:  # noqa: ANN001
    page = sign_in(browser, stack, stack.keys["auditor"])
    audit_id, _ = submit_form(page, EVIL, "P106 = <b>bold</b> <img src=x onerror=alert(1)>")
    goto_settled(page, f"/ui/audits/{audit_id}")
    try:  # the page of the running audit
        _shown_as_text(page)
    except Exception as exc:  # playwright's Error: the page reloaded itself as the audit ended, mid-check
        if "context was destroyed" not in str(exc) and "navigat" not in str(exc):
            raise
        page.wait_for_load_state("load")
        _shown_as_text(page)
    wait_for(stack.client("auditor"), audit_id, timeout=120)
    page.wait_for_load_state("load")  # the open page reloads itself once the audit ends (polling): let it finish
    goto_settled(page, f"/ui/audits/{audit_id}")
    _shown_as_text(page)  # and the page of the finished audit
    page.click("p.erase a")  # erasing asks first, naming the person and what goes with them
    assert "/erase" in page.url and page.inner_text("h1").startswith(f"Erase {EVIL}")
    assert stack.client("auditor").get(f"/audits/{audit_id}").status_code == 200  # asking erased nothing
    assert audit_id[:8] in page.inner_text("#to-delete")
    page.click("#confirm-erase")  # the genuine form erases; the answer is a page of counts (post/redirect/get)
    assert "/ui/erased?" in page.url and stack.client("auditor").get(f"/audits/{audit_id}").status_code == 404
    counts = dict(
        zip(
            page.locator("#erased-counts dt").all_inner_texts(),
            page.locator("#erased-counts dd").all_inner_texts(),
            strict=True,
        )
    )
    assert counts["audits"] == "1" and counts["facts"] == "1", counts
    page.reload()  # a refresh repeats nothing and still reports the erasure
    assert page.locator("#erased-counts").count() == 1 and "erased" in page.inner_text("h1")
    page.click("header button")  # sign out (a CSRF-protected form)
    assert "/ui/signin" in page.url
    assert page.goto(f"/ui/audits/{audit_id}") and "/ui/signin" in page.url
    page.context.close()
