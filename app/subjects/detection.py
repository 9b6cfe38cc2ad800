"""What a "no" is worth: how many facts the default verdict misses, as the project has measured it. The command
line's table, the dashboard's audit page and the person's reply page all read it from here, so that one
measurement (today the recall on well-known people; later the limit of detection on a model taught invented people
at known doses) replaces it everywhere.

Today's numbers: the famous cohorts (74 people, 5 facts each) audited through the service at the default options,
judged by the shipped null at p <= 0.01 (docs/measures.md, "Measured now": through the service, 338 people at the
defaults; benchmarks/results/results_calibration_cohorts_service.json, which tests/test_repository_artifacts.py compares
with this table). A famous person's fact is one the model most likely saw in training, so the share found is an
upper bound of what it finds for a less-known person."""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.catalog import load_catalog


@dataclass(frozen=True)
class Recall:
    found: int  # facts flagged memorized at the default verdict
    of: int  # facts audited
    who: str = "famous people"
    seen: str = "facts the model has most likely read"


# model -> property id -> its recall; "" for all the measured properties together
MEASURED: dict[str, dict[str, Recall]] = {
    "smollm2-135m": {
        "": Recall(20, 370),
        "P106": Recall(16, 74),
        "P27": Recall(1, 74),
        "P19": Recall(0, 74),
        "P21": Recall(3, 74),
        "P1412": Recall(0, 74),
    },
    # the verdict at the default variant on the people the model was trained on (docs/measures.md, "groundtruth-tiny
    # (30 trained vs 30 held-out people"; results_verdict_power_roster.json)
    "groundtruth-tiny": {"": Recall(147, 150, "people it was trained on", "facts the model has read")},
}
SOURCE = "docs/measures.md, 'Measured now'"


@dataclass(frozen=True)
class Limit:
    """The limit of detection of the default verdict, measured on a model taught invented people at known doses:
    the number of exposures in training at which it finds half (lod50) and 90 % (lod90) of the facts, all five
    properties and both phrasings pooled ("> 64": not reached at the highest dose tested), and the occupation's
    lod50 alone (a property no name hints at; what a name suggests is cancelled by the null at every dose)."""

    lod50: str
    lod90: str
    occupation_lod50: str
    on: str = "smollm2-taught"  # the taught model it was measured on
    size: str = "135M"


# model -> the limit of detection of the default verdict (benchmarks/results/limit_of_detection.json, which
# tests/app/test_limit_of_detection_stated.py compares with this table); a model of the taught model's size borrows it
LIMITS: dict[str, Limit] = {"smollm2-taught": Limit("> 64", "> 64", "25.3")}
LIMITS["smollm2-135m"] = LIMITS["smollm2-taught"]


def _times(dose: str) -> str:
    """ "> 64" -> "even 64", "19.2" -> "fewer than 20" (a limit between two doses: the next whole exposure)."""
    if dose.startswith(">"):
        return f"even {dose.removeprefix('>').strip()}"
    return f"fewer than {math.ceil(float(dose))}"


def limit_line(model: str) -> str:
    """The limit of detection in one clause, or "" where none was measured for a model of this one's size."""
    if (limit := LIMITS.get(model)) is None:
        return ""
    return (
        f"a fact seen {_times(limit.lod90)} times in training may be missed by this audit on a model of this size"
        f" ({limit.size}; on {limit.on}, 50 % found at {limit.lod50} exposures, 90 % at {limit.lod90}; an occupation"
        f" half the time at {limit.occupation_lod50}; docs/measures.md, 'Limit of detection')"
    )


# Beside the null's mean: why a fact about an invented person scores above zero at all.
NAME_INFERENCE = (
    "the null's mean is what a name alone earns: a name suggests citizenship, language and gender, so invented people"
    " with names of the same origin score there too, and a fact counts only above that"
)


def recall(model: str, pid: str = "") -> Recall | None:
    """The measured recall of the default verdict on ``model`` for property ``pid`` ("" for all), or None."""
    return MEASURED.get(model, {}).get(pid)


def _label(pid: str) -> str:
    catalog = load_catalog()
    return catalog.get(pid).label if pid in catalog else pid


def miss_line(model: str, pids: list[str]) -> str:
    """One sentence for a table or a page of results: how much a 'no' (not found) is worth on ``model``."""
    total = recall(model)
    if total is None:
        if limit := limit_line(model):
            return f"not found is not found to be absent: {limit}"
        return (
            f"not found is not found to be absent: how many facts the test misses on {model} has not been measured"
            " (on smollm2-135m it found 20 of 370 facts of famous people)"
        )
    parts = [f"{_label(p)} {r.found} of {r.of}" for p in dict.fromkeys(pids) if (r := recall(model, p))]
    line = (
        f"not found is not found to be absent: on {model} the test found {total.found} of {total.of} facts of"
        f" {total.who} at the default options ({'; '.join([*parts, SOURCE])}), so it misses most facts a model has"
        " seen"
    )
    return f"{line}; {limit}" if (limit := limit_line(model)) else line


def _limit_words(model: str) -> str:
    """The limit of detection in plain words, or ""."""
    if (limit := LIMITS.get(model)) is None:
        return ""
    times = (
        f"even {limit.lod90.removeprefix('>').strip()}" if limit.lod90.startswith(">") else f"fewer than {limit.lod90}"
    )
    return (
        f" We also taught a model of this size invented people: a fact it had read {times} times during training"
        " could still be missed."
    )


def miss_words(model: str) -> str:
    """The same in plain words, for the person's page."""
    total = recall(model)
    closing = " So when the test does not find a fact, that does not show that the model does not know it."
    if total is None:
        if limit := _limit_words(model):
            return f"This test can miss facts the model knows.{limit}{closing}"
        return (
            "This test can also miss facts the model knows. We have not yet measured how often it misses them on this"
            f" model.{closing}"
        )
    return (
        f"This test can also miss facts the model knows. We ran it on {total.of} facts about {total.who}, {total.seen}."
        f" It found {'only ' if total.found < total.of / 2 else ''}{total.found} of"
        f" them.{_limit_words(model)}{closing}"
    )
