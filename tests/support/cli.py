"""The `memaudit` command run as a user runs it: a subprocess on its own SQLite database, with none of the test
session's MEMAUDIT_* settings (shared by the CLI tests; the `cli_env` fixture is in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"


def cli_env_at(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMAUDIT_")}
    env["MEMAUDIT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    return env


def memaudit(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
