"""A subject audit's defaults are stated once (core/defaults.py): the API's options, the command line, the forget
set's description, the dashboard and the docs say the same numbers, and the chance z* they quote is what chance
gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from app.cli import build_parser
from app.subjects.schemas import SubjectAuditOptions
from core import defaults
from core.measures.wikimem import z_star

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]  # the reference docs (docs/lab/ is dated notes)

# What the docs said before the defaults changed (issue 22) and must no longer say of today's.
STALE = (
    "101 candidates already",
    "API probes them all",
    "all probed by the API",
    "service default is every paraphrase",
    "service's default (11 templates",
    "no GPU was ever measured",
)


def test_the_api_options_are_the_stated_defaults():
    options = SubjectAuditOptions()
    assert options.paraphrases == defaults.PARAPHRASES
    assert options.counterfactuals == defaults.COUNTERFACTUALS
    assert options.alpha == defaults.ALPHA
    assert options.similar_names == defaults.SIMILAR_NAMES
    assert options.lookalikes == defaults.LOOKALIKES
    assert defaults.TEMPLATES == defaults.PARAPHRASES + 1 and defaults.CANDIDATES == defaults.COUNTERFACTUALS + 1


def _help(parser, command: str) -> str:
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return " ".join(sub.format_help().split())


def test_the_command_line_uses_and_says_the_stated_defaults():
    parser = build_parser("audit")
    args = parser.parse_args(["audit", "--name", "x", "--fact", "P106=physicist"])
    assert (args.paraphrases, args.counterfactuals, args.alpha) == (
        defaults.PARAPHRASES,
        defaults.COUNTERFACTUALS,
        defaults.ALPHA,
    )
    help_text = _help(parser, "audit")
    assert "unless told otherwise" not in help_text
    assert f"(default: {defaults.COUNTERFACTUALS})" in help_text
    export = _help(build_parser("export"), "export")
    assert defaults.CHANCE_Z_PHRASE in export and "101 candidates" not in export


def test_the_api_description_and_the_dashboard_quote_the_defaults():
    from app.openapi_export import render

    document = json.dumps(json.loads(render()), ensure_ascii=False)
    assert "101 candidates" not in document and defaults.CHANCE_Z_PHRASE in document
    templates = (REPO / "app" / "ui" / "templates").rglob("*.html")
    for path in templates:
        assert "101 candidates" not in path.read_text(), path
    assert not [p for p in (REPO / "app").rglob("*") if p.is_file() and b"101 candidates" in p.read_bytes()]


def test_the_quoted_chance_z_star_is_what_chance_gives():
    """Normal scores, the truth first by chance: the mean z* over 40,000 such draws (its standard error ≈ 0.004)."""
    rng = np.random.default_rng(45)
    truth = [True] + [False] * defaults.COUNTERFACTUALS
    draws = []
    while len(draws) < 40_000:
        scores = rng.standard_normal(defaults.CANDIDATES)
        best = int(scores.argmax())
        scores[0], scores[best] = scores[best], scores[0]  # the truth ranks first by chance: the best is put there
        draws.append(z_star(list(scores), truth))
    assert abs(np.mean(draws) - defaults.CHANCE_Z_STAR) < 0.05, np.mean(draws)


def test_the_docs_state_the_same_defaults():
    """Where a doc says what the default is, it says core/defaults.py's numbers; no stale phrase is left."""
    wrong = []
    for path in DOCS:
        text = path.read_text()
        wrong += [f"{path.name}: {phrase!r}" for phrase in STALE if phrase in " ".join(text.split())]
        flat = " ".join(text.split())
        for match in re.finditer(r"defaults?\b[^.;]{0,120}?\b(\d+) counterfactuals", flat):
            if int(match[1]) != defaults.COUNTERFACTUALS and not re.search(r"\b(was|were|before)\b", match[0]):
                wrong.append(f"{path.name}: {match[0]}")
        for match in re.finditer(r"defaults?\b[^.;]{0,120}?baseline \+ (\d+) paraphrase", flat):
            if int(match[1]) != defaults.PARAPHRASES:
                wrong.append(f"{path.name}: {match[0]}")
    assert not wrong, "\n".join(wrong)
