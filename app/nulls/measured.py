"""What was measured about a shipped null, beside it (``app/nulls/shipped/<model>.measured.json``,
``memaudit.measured/1``): the rates the calibration caveat states, read from the benchmarks' results files by
``memaudit nulls ship`` and read back by the calibrator, so that no measured percentage is a constant of the code.

The caveat is about people with ordinary names of their country whom the model cannot know (invented people written
by other hands than the null's), on the properties a name hints at (``TYPICAL_NAMES``): how often the default verdict
flags them through the service and in the benchmark, at p <= 0.01 and at p <= 0.05, for the origins the null's roster
has and for the others.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FORMAT = "memaudit.measured/1"
SUFFIX = ".measured.json"
TYPICAL_NAMES = ("P27", "P19", "P1412")  # citizenship, birthplace, languages: what a name hints at
SERVICE_RESULTS = "results_calibration_cohorts_service.json"  # python -m benchmarks.calibration_cohorts --out ...
BENCHMARK_RESULTS = "results_verdict_power_roster.json"  # python -m benchmarks.hand_null --out ...
BENCHMARK_KEY = "reader=common-names-2"  # the run with today's name-origin reader (lookalikes.READER)


def _service(results: Mapping[str, Any], fingerprint: str) -> dict[str, Any]:
    """The invented people's facts flagged at p <= 0.01 through the service, judged by this very null (its model
    fingerprint), over the name-hinted properties."""
    run = results["same_origin"]
    fingerprints = {d["fingerprint"] for a in run["null_audits"] for d in a["distributions"]}
    if fingerprints != {fingerprint}:
        raise ValueError(f"{SERVICE_RESULTS} was not judged by this null (fingerprints {sorted(fingerprints)})")
    per = run["fictitious"]["per_property"]
    flagged = sum(per[pid]["memorized_p01"]["k"] for pid in TYPICAL_NAMES)
    return {"flagged_p01": flagged, "facts": sum(per[pid]["memorized_p01"]["n"] for pid in TYPICAL_NAMES)}


def _benchmark(results: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The benchmark's counts (python -m benchmarks.hand_null) against the service's null of 200, split by whether
    the null's roster has the person's origin."""
    run = results[BENCHMARK_KEY]["hand_null"]
    if run["model"] != model:
        raise ValueError(f"{BENCHMARK_RESULTS}[{BENCHMARK_KEY!r}] measured {run['model']}, not {model}")
    out: dict[str, Any] = {"measured": run["measured"]}
    for group, key in (("origins_the_null_has", "unknown_covered"), ("other_origins", "unknown_other_origins")):
        counts = [run["properties"][pid]["nulls"]["null"][key] for pid in TYPICAL_NAMES]  # [p<=0.01, p<=0.05, n]
        out[group] = {
            "flagged_p01": sum(c[0] for c in counts),
            "flagged_p05": sum(c[1] for c in counts),
            "facts": sum(c[2] for c in counts),
        }
    return out


def build(results_dir: Path, model: str, fingerprint: str) -> dict[str, Any]:
    """The measured document of ``model``'s shipped null from the benchmarks' results files."""
    service = json.loads((results_dir / SERVICE_RESULTS).read_text())
    benchmark = json.loads((results_dir / BENCHMARK_RESULTS).read_text())
    return {
        "format": FORMAT,
        "model": model,
        "fingerprint": fingerprint,
        "properties": list(TYPICAL_NAMES),
        "sources": [f"benchmarks/results/{SERVICE_RESULTS}", f"benchmarks/results/{BENCHMARK_RESULTS}"],
        "service": _service(service, fingerprint),
        "benchmark": _benchmark(benchmark, model),
    }


def dumps(document: Mapping[str, Any]) -> bytes:
    """The file's bytes (the same measurements, the same bytes)."""
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


def percent(k: int, n: int) -> str:
    return f"{k}/{n} = {100 * k / n:.1f} %"


SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
CAVEAT_MODEL = "smollm2-135m"  # the default model, whose shipped null the typical-names caveat was measured with


def load(model: str = CAVEAT_MODEL) -> dict[str, Any] | None:
    """The measured document shipped beside ``model``'s null; None where there is none (a source tree without it)."""
    try:
        document = json.loads((SHIPPED_DIR / f"{model}{SUFFIX}").read_text())
    except (OSError, ValueError):
        return None
    return document if document.get("format") == FORMAT else None


def typical_names_caveat(document: Mapping[str, Any] | None) -> str:
    """The caveat of a verdict on a name-hinted property, its rates read from the measured document."""
    if document is None:
        return (
            "for people with ordinary names of their country this null's rate is measured to hold at p <= 0.01 only"
            " within a factor of two, lenient thresholds understate it, and names of a tradition outside the"
            " null's origins are flagged more often: docs/measures.md, 'Typical names'"
        )
    service, bench = document["service"], document["benchmark"]
    have, other = bench["origins_the_null_has"], bench["other_origins"]
    return (
        "for people with ordinary names of their country this null's rate holds at p <= 0.01 within a factor of two"
        f" (measured on {document['model']} with invented people written by other hands:"
        f" {percent(service['flagged_p01'], service['facts'])} of their facts through the service,"
        f" {percent(have['flagged_p01'], have['facts'])} in the benchmark), lenient thresholds understate it"
        f" ({percent(have['flagged_p05'], have['facts'])} at p <= 0.05), and names of a tradition outside the"
        " null's 51 origins (Korean, Greek, Arabic, Persian, Thai ...) are flagged more often"
        f" ({other['flagged_p01']} of {other['facts']} such facts): docs/measures.md, 'Typical names'"
    )
