"""Does the model seem to confuse this person with others who share the name (issue 42)? Measured, not guessed: a
misattributed fact's false value is a true value of another stored subject of the same owner (the audit's cohort,
its batches; never another principal's data) whose given or family name is one of this person's, compared folded
(case and accents: core.names.lookalikes.fold). A subject with the very same full name is left out: it is as likely
another record of this person (an earlier audit with other facts) as a namesake. Only a yes/no reaches the reader."""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from app.db.models import Audit, Subject
from app.subjects import repository
from core.names.lookalikes import fold

_SEPARATORS = re.compile(r"[\s\-]+")


def name_parts(name: str) -> frozenset[str]:
    """A name's given and family names, folded; initials ('J.') are no name part."""
    return frozenset(fold(p) for p in _SEPARATORS.split(name.strip()) if len(p.rstrip(".")) > 1)


def confused(session: Session, audit: Audit, subject: Subject | None, property_id: str, value: str) -> bool | None:
    """True where ``value`` is a true value of another subject of the audit's owner sharing a name part with
    ``subject``; None where there is no owner (no data to compare within)."""
    if subject is None or audit.owner_key_id is None:
        return None
    parts, whole = name_parts(subject.name), fold(" ".join(subject.name.split()))
    for other in repository.namesakes_with_value(session, audit.owner_key_id, subject.id, property_id, value):
        if fold(" ".join(other.split())) != whole and parts & name_parts(other):
            return True
    return False
