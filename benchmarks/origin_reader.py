"""How well the name-origin reader (core.names.lookalikes.name_origin) places names in their naming tradition — the
origin same-origin look-alikes are drawn from (docs/measures.md, "Look-alike names";
docs/lab/2026-11-27-origin-reader.md).

    python -m benchmarks.origin_reader                  # the reader as it ships, and the grid its settings came from
    python -m benchmarks.origin_reader --out benchmarks/results/results_origin_reader.json

Labelled names, scored separately:

* ``roster``: the null roster's 775 hand-written people (core/names/null_roster.json), each labelled with the locale
  its writer gave it — the set the reader's settings are chosen on;
* the benchmark cohorts (benchmarks/calibration_cohorts.json), labelled by their citizenship: a name counts as placed
  when the tradition read holds an origin of that country — held out (neither the reader's lists nor its settings
  were chosen on them). Famous names include single names and nicknames ("Pelé", "J. K. Rowling").

For each the count of names read as another tradition, and, under ``grid``, the same for every setting tried: with
and without the hand-written common names (``reader_names.json``), and the list bonus. Pure computation, no model;
a few seconds per setting.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from core.names import lookalikes
from core.names.origins import BY_LOCALE, ORIGINS

REPO = Path(__file__).resolve().parent.parent
COHORTS = ("fictitious", "fictitious_more", "fictitious_other", "famous", "famous_more")
SETTINGS = ("LIST_BONUS",)


def _regions(name: str) -> set[str]:
    origin = lookalikes.name_origin(name)
    return {BY_LOCALE[loc].region for loc in origin.locales} if origin else set()


def placement() -> dict[str, Any]:
    """Names read as another tradition, per labelled set (the reader as currently configured)."""
    roster = json.loads((REPO / "core" / "names" / "null_roster.json").read_text())["people"]
    missed = Counter(p["locale"] for p in roster if BY_LOCALE[p["locale"]].region not in _regions(p["name"]))
    out: dict[str, Any] = {"roster": {"misplaced": sum(missed.values()), "of": len(roster), "by_locale": dict(missed)}}
    cohorts = json.loads((REPO / "benchmarks" / "calibration_cohorts.json").read_text())
    countries: dict[str, set[str]] = {}
    for origin in ORIGINS:
        countries.setdefault(origin.country, set()).add(origin.region)
    for name in COHORTS:
        labelled = [
            (p["name"], countries[c])
            for p in cohorts[name]
            for c in [next(f["value"] for f in p["facts"] if f["property"] == "P27")]
            if c in countries  # a country no origin has cannot be placed
        ]
        wrong = [n for n, want in labelled if not _regions(n) & want]
        out[name] = {"misplaced": len(wrong), "of": len(labelled), "names": wrong}
    out["held_out"] = {
        "misplaced": sum(out[c]["misplaced"] for c in COHORTS),
        "of": sum(out[c]["of"] for c in COHORTS),
    }
    return out


def _clear() -> None:
    cached = (lookalikes._index, lookalikes._trigram_model, lookalikes.reader_lists, lookalikes._reader_names)
    for fn in (*cached, lookalikes.name_origin):
        fn.cache_clear()


@contextmanager
def configured(common_names: bool, **settings: Any) -> Iterator[None]:
    """The reader with other settings (restored after)."""
    saved = {k: getattr(lookalikes, k) for k in SETTINGS} | {"_reader_names": lookalikes._reader_names}
    try:
        for key, value in settings.items():
            setattr(lookalikes, key, value)
        if not common_names:
            lookalikes._reader_names = cache(dict)  # type: ignore[assignment]
        _clear()
        yield
    finally:
        for key, value in saved.items():
            setattr(lookalikes, key, value)
        _clear()


def grid() -> list[dict[str, Any]]:
    rows = []
    for common, bonus in itertools.product((False, True), (5.0, 10.0, 20.0, 40.0)):
        settings = {"LIST_BONUS": bonus}
        with configured(common, **settings):
            found = placement()
        rows.append(
            {"common_names": common, **settings} | {k: found[k]["misplaced"] for k in ("roster", *COHORTS, "held_out")}
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--no-grid", action="store_true", help="only the reader as it ships")
    args = parser.parse_args(argv)
    shipped = placement()
    result: dict[str, Any] = {
        "reader": lookalikes.READER,
        "settings": {k: getattr(lookalikes, k) for k in SETTINGS},
        "shipped": shipped,
    }
    print(json.dumps({k: (v["misplaced"], v["of"]) for k, v in shipped.items()}))
    if not args.no_grid:
        with configured(False, LIST_BONUS=10.0):
            result["before"] = placement()  # the reader before common names (faker-lists-1)
        result["grid"] = grid()
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
