"""Checked-in artifacts that must match the code: the OpenAPI document, the configuration reference (written from
the Settings class), the compose file, the docs' links and the lab's place (benchmarks/ holds code; results under
benchmarks/results/)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_openapi_document_is_current():
    from app.openapi_export import render

    checked_in = (REPO / "openapi" / "openapi.json").read_text()
    assert checked_in == render(), "openapi/openapi.json is stale: run `make openapi` and commit it"


def test_the_readme_is_short_and_the_changelog_keeps_a_changelog():
    readme = (REPO / "README.md").read_text().splitlines()
    assert len(readme) <= 120, f"README.md has {len(readme)} lines: move detail to a page under docs/"
    measures = (REPO / "docs" / "measures.md").read_text().splitlines()
    assert len(measures) <= 450, f"docs/measures.md has {len(measures)} lines: dated measurements go to docs/lab/"
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog\n") and "\n## [Unreleased]\n" in changelog  # keepachangelog.com


def heading_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(repo: Path) -> list[str]:
    """Relative links of the README, the changelog and docs/**/*.md (the lab notebook docs/lab/ too) whose file or
    heading does not exist."""
    out = []
    for page in [repo / "README.md", repo / "CHANGELOG.md", *sorted((repo / "docs").rglob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                out.append(f"{page.relative_to(repo)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md":
                slugs = {heading_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), flags=re.M)}
                if anchor not in slugs:
                    out.append(f"{page.relative_to(repo)}: {target} (no such heading)")
    return out


def test_every_link_of_the_docs_leads_somewhere(tmp_path):
    assert broken_links(REPO) == []
    (tmp_path / "docs").mkdir()
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n")
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Served models (OpenAI-compatible)\n")
    (tmp_path / "docs" / "lab").mkdir()
    (tmp_path / "docs" / "lab" / "n.md").write_text("# Note\n[up](../a.md#a-page) [lost](../a.md#nowhere)\n")
    (tmp_path / "README.md").write_text(
        "# Intro\n[ok](docs/a.md#served-models-openai-compatible) [web](https://example.org/x#y) [top](#intro)\n"
        "[gone](docs/b.md) [no heading](docs/a.md#served)\n```\n[in code](nowhere.md)\n```\n"
    )
    assert broken_links(tmp_path) == [
        "README.md: docs/b.md (no such file)",
        "README.md: docs/a.md#served (no such heading)",
        "docs/lab/n.md: ../a.md#nowhere (no such heading)",
    ]


def lab_in_the_house(repo: Path) -> list[str]:
    """What benchmarks/ must not hold: a results file at its top level (they go to benchmarks/results/), a patch
    (unlanded work is landed or left to git history) or an edit of the import path (benchmarks run as modules)."""
    bench = repo / "benchmarks"
    out = [f"{p.relative_to(repo)}: a results file at the top" for p in sorted(bench.glob("results*")) if p.is_file()]
    out += [f"{p.relative_to(repo)}: a patch" for p in sorted(bench.rglob("*.patch"))]
    for path in sorted(bench.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
                out.append(f"{path.relative_to(repo)}:{node.lineno}: sys.path edited")
    return out


def test_the_lab_lives_outside_the_house(tmp_path):
    assert lab_in_the_house(REPO) == []
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "results_ok.json").write_text("{}")
    (tmp_path / "benchmarks" / "results_x.json").write_text("{}")
    (tmp_path / "benchmarks" / "old").mkdir()
    (tmp_path / "benchmarks" / "old" / "work.patch").write_text("")
    (tmp_path / "benchmarks" / "run.py").write_text("import sys\n\nsys.path.insert(0, '.')\n")
    assert lab_in_the_house(tmp_path) == [
        "benchmarks/results_x.json: a results file at the top",
        "benchmarks/old/work.patch: a patch",
        "benchmarks/run.py:3: sys.path edited",
    ]


def test_configuration_reference_is_current():
    """docs/configuration.md is written from the Settings class; every setting has a description."""
    from app.settings_doc import render

    checked_in = (REPO / "docs" / "configuration.md").read_text()
    assert checked_in == render(), "docs/configuration.md is stale: run `make docs` and commit it"


@pytest.mark.skipif(
    shutil.which("docker-compose") is None and not os.environ.get("CI"),
    reason="docker-compose (Debian's v1 package) is not installed; `make test` and CI install it",
)
def test_compose_file_is_valid():
    result = subprocess.run(
        ["docker-compose", "-f", str(REPO / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr


def test_the_stated_miss_rate_is_the_measured_recall():
    """app.subjects.detection (what the CLI, the dashboard and the person's page say a "not found" is worth) holds
    the famous cohorts' counts through the service at the defaults, as the benchmark's results file has them."""
    import json

    from app.subjects.detection import MEASURED

    found = sorted(REPO.glob("benchmarks/**/results_calibration_cohorts_service.json"))
    assert found, "the results of benchmarks.calibration_cohorts through the service are missing"
    famous = json.loads(found[0].read_text())["same_origin"]["famous"]
    stated = MEASURED["smollm2-135m"]
    for pid, measured in famous["per_property"].items():
        counts = measured["memorized_p01"]
        assert (stated[pid].found, stated[pid].of) == (counts["k"], counts["n"]), pid
    total = famous["cohort"]
    assert stated[""].of == total["facts"] and stated[""].found == round(total["memorized"] * total["facts"])


def test_the_vendored_llama_wheel_is_the_one_its_readme_names():
    """vendor/llama-cpp/: one wheel, the version the served-test extra accepts, its sha256 the README's."""
    import hashlib
    import tomllib

    from packaging.requirements import Requirement

    wheels = sorted((REPO / "vendor" / "llama-cpp").glob("llama_cpp_python-*.whl"))
    assert len(wheels) == 1, wheels
    version = wheels[0].name.split("-")[1]
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    requirement = Requirement(next(r for r in extras["served-test"] if r.startswith("llama-cpp-python")))
    assert requirement.specifier.contains(version), (version, str(requirement))
    readme = (REPO / "vendor" / "llama-cpp" / "README.md").read_text()
    assert f"`{wheels[0].name}`" in readme
    assert f"`{hashlib.sha256(wheels[0].read_bytes()).hexdigest()}`" in readme
    assert f"llama_cpp_python-{version}.tar.gz" in readme
