"""Checked-in artifacts that must match the code: the OpenAPI document, the configuration reference (written from
the Settings class) and the compose file."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_openapi_document_is_current():
    from app.openapi_export import render

    checked_in = (REPO / "openapi" / "openapi.json").read_text()
    assert checked_in == render(), "openapi/openapi.json is stale: run `make openapi` and commit it"


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
