"""The reply a person can read (GDPR Art. 12 "clear and plain language"): for one subject audit, a printable page
that says which facts the model gives away about the person, with one example sentence each, how often the test
is wrong both ways (its measured false-positive rate and how many facts it misses, in words: a fact not found is
not a fact found to be absent), what was sent for forgetting, and whether a later check
found the facts forgotten. For the data subject (their token) and for whoever may see the audit.

It reads through the subject audit's own service (so the access log records the read) and the evidence record;
it writes nothing else. Words only: no symbols, scores or test names (tests/ui checks a reading-ease floor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.audits.service import visible_audit_of_kind
from app.auth.keys import Principal
from app.db.models.audit import AuditStatus
from app.deps import SessionDep, SettingsDep
from app.evidence import service as evidence
from app.evidence.schemas import EntryKind
from app.privacy import access_log
from app.requests.repository import recipient_names
from app.settings import Settings
from app.subjects import detection
from app.subjects import repository as subjects_repository
from app.subjects import service as subjects
from app.subjects.schemas import FactResultRead
from app.ui.web import Signed, UiRoute, render
from core.catalog import load_catalog

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


@dataclass
class Found:
    label: str
    values: list[str]
    example: str


@dataclass
class Reply:
    name: str
    model: str
    status: str
    checked_on: str | None
    found: list[Found] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    unclear: list[str] = field(default_factory=list)  # ranked first, yet not more than for made-up people
    waiting: list[str] = field(default_factory=list)
    sureness: str = ""
    misses: str = ""  # how many facts the test misses (app.subjects.detection): a "not found" is not "absent"
    sent: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    tool: str = ""
    how: str = ""  # mode generation: how the model was asked and what it cost, in plain words


def _day(value: Any) -> str | None:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return f"{value:%d %B %Y}".lstrip("0") if value else None


def _how(summary: dict[str, Any] | None) -> str:
    """How an audit in mode generation asked the model, and what it cost, in plain words ("" for scoring)."""
    gen = (summary or {}).get("generation")
    if not gen:
        return ""
    usage, k = gen.get("usage") or {}, (gen.get("options") or {}).get("samples")
    return (
        f"We asked the model about each fact {k} times and read what it answered. It cost {usage.get('queries', 0)}"
        f" questions to the model and {usage.get('completion_tokens', 0)} tokens (word pieces) of answers."
    )


def _example(fact: FactResultRead, name: str) -> str:
    """A sentence the model completed with the true value: the first template that ranked it first (mode
    generation: a prompt and how often the model answered it with a true value)."""
    if fact.answers is not None and fact.answers.prompts:
        asked = fact.answers.prompts[0]
        said = [a for a in asked.samples if a.kind == "true"]
        value = said[0].value if said else (fact.values[0] if fact.values else "")
        return f"{asked.prompt} … {value} ({len(said)} of {len(asked.samples)} answers)"
    catalog = load_catalog()
    prop = catalog.get(fact.property) if fact.property in catalog else None
    hits = [c for c in fact.canaries if c.memorized and c.kind != "context"] or fact.canaries
    index = hits[0].template_index if hits else 0
    value = fact.values[0] if fact.values else ""
    if prop is None:
        return f"{name}: {value}"
    return prop.render(index if 0 <= index < len(prop.templates) else 0, name, value)


def _in_words(k: int, n: int) -> str:
    """How often the test flagged a made-up person's fact, in words."""
    if n == 0:
        return ""
    if k == 0:
        return (
            f"To see how often this test is wrong, we also ran it on {n} facts about made-up people. The model cannot "
            "know them. The test never said the model knew one of these facts."
        )
    one_in = max(1, round(n / k))
    return (
        f"To see how often this test is wrong, we also ran it on {n} facts about made-up people. The model cannot "
        f"know them. The test said the model knew {k} of these facts. So it is wrong about one time in {one_in}."
    )


def _sureness(facts: list[FactResultRead]) -> str:
    rates = [f.calibration.fpr["pvalue"] for f in facts if f.calibration and f.calibration.fpr]
    if not rates:
        return "We are still testing how often this check is wrong. Come back to this page later."
    worst = max(rates, key=lambda r: (r.k + 1) / (r.n + 1))
    return _in_words(worst.k, worst.n)


def _sent(entries: list[dict[str, Any]], names: dict[str, str]) -> list[str]:
    """Deliveries of a forget set to a registered recipient (app/requests), the only thing said to be "sent": an
    export (GET /forget-set, `memaudit export`, the demo's file) was downloaded, not sent to be removed."""
    out = []
    for e in entries:
        if e["kind"] != EntryKind.REQUEST_DELIVERED:
            continue
        n = e["body"].get("records", 0)
        facts = "one fact" if n == 1 else f"{n} facts"
        to = names.get(e["body"].get("recipient"), "a system that removes data from the model")
        out.append(f"On {_day(e['at'])}, a list of {facts} was sent to {to} to be removed from the model.")
    return out


def _checks(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in entries:
        if e["kind"] == EntryKind.VERIFICATION:
            held = e["body"].get("forgotten")
            outcome = "the model no longer gives these facts away" if held else "the model still gives facts away"
            out.append(f"On {_day(e['at'])}, we checked the model again: {outcome}.")
    return out


def build(session: Session, settings: Settings, principal: Principal, audit_id: str) -> Reply:
    audit = visible_audit_of_kind(session, principal, audit_id, "subject")
    subject = subjects_repository.get_subject(session, audit.subject_id) if audit.subject_id else None
    name = subject.name if subject else "this person"
    provenance = audit.provenance or {}
    version = (provenance.get("memaudit") or {}).get("version")
    reply = Reply(
        name=name,
        model=audit.model,
        status=audit.status,
        checked_on=_day(audit.finished_at),
        tool=f"memaudit {version}" if version else "memaudit",
    )
    if audit.status != AuditStatus.SUCCEEDED:
        return reply
    facts = subjects.read_facts(session, principal, audit_id, "summary").facts
    access_log.record(session, principal, "read_facts", subject_id=audit.subject_id, audit_id=audit_id)
    for f in facts:
        cal = f.calibration
        label = f.label
        if cal is None or cal.status != "ready":
            reply.waiting.append(label)
        elif cal.memorized:
            reply.found.append(Found(label, f.values, _example(f, name)))
        elif f.lenient:
            reply.unclear.append(label)
        else:
            reply.not_found.append(label)
    reply.sureness, reply.misses = _sureness(facts), detection.miss_words(audit.model)
    reply.how = _how(audit.summary)
    entries = evidence.about(session, settings, audit.subject_id, audit_id) if audit.subject_id else []
    reply.sent, reply.checks = _sent(entries, recipient_names(session, audit_id)), _checks(entries)
    return reply


@router.get("/audits/{audit_id}/reply", response_class=HTMLResponse)
def reply_page(
    audit_id: Annotated[str, Path(max_length=64)],
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    ui: Signed,
) -> HTMLResponse:
    reply = build(session, settings, ui.principal, audit_id)
    session.commit()  # the access log's entry is written before the page leaves
    return render(request, "reply.html", reply=reply, audit_id=audit_id)
