"""A verification's summary (targets removed or still retrievable, locality and over-forgetting, the paired test,
the probes) and one evidence entry per forgotten person: counts and p-values, never a name or a value."""

from __future__ import annotations

from typing import Any

from app.db.models import Audit
from app.db.models.verification import VerificationFact, VerificationPerson
from app.evidence import repository as evidence
from app.evidence.schemas import EntryKind
from app.settings import get_settings
from app.verification.schemas import FactStatus, PersonRole, VerificationStored
from core.measures.null import Rate
from core.measures.paired import discordant_pairs, mcnemar_exact
from workers.jobs.verification_relearning import NO_RELEARNING


def rate_of(k: int, n: int) -> dict[str, Any] | None:
    if n == 0:
        return None
    r = Rate.of(k, n)
    return {"rate": r.rate, "k": r.k, "n": r.n, "ci95": [r.low, r.high]}


def summarize(people: list[VerificationPerson], options: VerificationStored) -> dict[str, Any]:
    """The verification's summary: people, targets removed or still retrievable, locality and over-forgetting, the
    paired test over the targets' templates, the probes (held-out templates, context, relearning)."""
    targets = [f for p in people for f in p.facts if f.target]
    counts = {str(s): sum(f.status == s for f in targets) for s in FactStatus}
    forgotten = sum(p.role == PersonRole.FORGOTTEN for p in people)
    summary: dict[str, Any] = {
        "max_p": options.max_p,
        "people": {
            "forgotten": forgotten,
            "locality": len(people) - forgotten,
            "name_neighbours": sum(bool((p.summary or {}).get("name_neighbour")) for p in people),
        },
        "targets": {"facts": len(targets), **counts},
        "removed": rate_of(counts[FactStatus.REMOVED], len(targets)),
        "still_retrievable": rate_of(counts[FactStatus.STILL_RETRIEVABLE], len(targets)),
        **_locality(people),
        "paired": _paired(targets),
    }
    summary.update(_probes(targets))
    if options.relearning is not None:
        summary["relearning"] = relearning_summary(people, targets, options)
    return summary


def _locality(people: list[VerificationPerson]) -> dict[str, Any]:
    """The facts outside the forget set: still retrievable, and over-forgotten per group — untouched people as
    given, name neighbours (locality.name_neighbours found them), the forgotten people's other facts."""
    locality = [f for p in people for f in p.facts if not f.target]
    kept = [f for f in locality if f.memorized_before]
    over = [f for f in kept if f.memorized_after is False]
    group = {
        f.id: "forgotten_people_other_facts"
        if p.role == PersonRole.FORGOTTEN
        else "name_neighbours"
        if (p.summary or {}).get("name_neighbour")
        else "locality_people"
        for p in people
        for f in p.facts
    }
    groups = ["locality_people", "forgotten_people_other_facts"]
    if "name_neighbours" in group.values():
        groups.append("name_neighbours")
    return {
        "locality": {
            "facts": len(locality),
            "retrievable_before": len(kept),
            "still_retrievable": rate_of(sum(f.status == FactStatus.STILL_RETRIEVABLE for f in kept), len(kept)),
        },
        "over_forgetting": rate_of(len(over), len(kept)),
        "over_forgetting_by_group": {
            name: rate_of(sum(group[f.id] == name for f in over), sum(group[f.id] == name for f in kept))
            for name in groups
        },
    }


def _paired(targets: list[VerificationFact]) -> dict[str, Any]:
    b = c = 0
    for f in targets:
        pair = discordant_pairs(
            (f.detail or {}).get("before_templates", []), (f.detail or {}).get("after_templates", [])
        )
        b, c = b + pair[0], c + pair[1]
    return {
        "test": "exact McNemar, one-sided, over the templates' rank-1 outcomes",
        "b": b,
        "c": c,
        "p": mcnemar_exact(b, c),
    }


def _probes(targets: list[VerificationFact]) -> dict[str, Any]:
    """The held-out templates' and the context probe's counts over the targets (absent when none was run)."""
    out: dict[str, Any] = {}
    held = [(f.detail or {}).get("held_out") for f in targets]
    held = [h for h in held if h]
    if held:
        templates = sum(len(h["templates"]) for h in held)
        out["held_out"] = {
            "facts": len(held),
            "templates": templates,
            "before_retrieved": sum(h["before_retrieved"] for h in held),
            "after_retrieved": sum(h["after_retrieved"] for h in held),
            "chance": sum(h["chance"] * len(h["templates"]) for h in held) / max(templates, 1),
        }
    in_context = [(f, f.detail["context"]) for f in targets if (f.detail or {}).get("context")]
    if in_context:
        out["context"] = {
            "facts": len(in_context),
            "before_retrieved": sum(c["before_retrieved"] for _, c in in_context),
            "after_retrieved": sum(c["after_retrieved"] for _, c in in_context),
            # the leak this probe is for: gone from the bare audit, still given back after the person's other facts
            "removed_but_retrieved": sum(
                f.status == FactStatus.REMOVED and c["after_retrieved"] for f, c in in_context
            ),
            "chance": sum(c["chance"] for _, c in in_context) / len(in_context),
        }
    return out


def relearning_summary(
    people: list[VerificationPerson], targets: list[VerificationFact], options: VerificationStored
) -> dict[str, Any]:
    forgotten = [p for p in people if p.role == PersonRole.FORGOTTEN]
    for p in forgotten:
        if (p.summary or {}).get("relearning") == "unavailable":
            return {"status": "unavailable", "reason": p.summary.get("relearning_reason") or NO_RELEARNING}
    from workers.unlearning.relearn import default_lr  # torch: the probe ran, on a transformers directory

    opts = options.relearning or {}
    scope = opts.get("scope", "all")
    out: dict[str, Any] = {
        "status": "done",
        "texts": opts.get("texts", "other_facts"),
        "scope": scope,
        "steps": opts.get("steps", 20),
        "lr": opts.get("lr") or default_lr(scope),
    }
    for group, relearned in (("relearned", True), ("others", False)):
        facts = [f for f in targets if (f.detail or {}).get("relearning", {}).get("relearned") is relearned]
        removed = [f for f in facts if f.status == FactStatus.REMOVED]
        back = [f for f in removed if f.detail["relearning"]["came_back"]]
        out[group] = {"removed_facts": len(removed), "came_back": rate_of(len(back), len(removed))}
    return out


def record_evidence(s, audit: Audit, people: list[VerificationPerson], options: VerificationStored) -> None:
    """One entry per forgotten person: counts and p-values, never a name or a value (the person's page reads it)."""
    settings = get_settings()
    for p in people:
        if p.role != PersonRole.FORGOTTEN:
            continue
        facts = [f for f in p.facts if f.target]
        counts = {str(st): sum(f.status == st for f in facts) for st in FactStatus}
        body = {
            "verification_audit_id": audit.id,
            "before_model": options.before,
            "after_model": audit.model,
            "before_audit_id": p.before_audit_id,
            # the forget-set export verified (people.export_sha256): its entry's seq, so the chain links the two
            "export_seq": options.export["seq"] if options.export else None,
            "facts": len(facts),
            **{k.replace(" ", "_"): v for k, v in counts.items()},
            "forgotten": bool(facts) and counts[FactStatus.REMOVED] == len(facts),
            "properties": {
                f.property_id: {"status": f.status, "p_before": f.p_before, "p_after": f.p_after} for f in facts
            },
        }
        evidence.append(
            s,
            settings,
            EntryKind.VERIFICATION,
            principal=f"key:{audit.owner_key_id}" if audit.owner_key_id is not None else "service",
            body=body,
            subject_id=p.subject_id,
            audit_id=audit.id,
        )
