"""The `memaudit` command run as a user runs it: a subprocess on its own SQLite database, with none of the test
session's MEMAUDIT_* settings (shared by the CLI tests; the `cli_env` fixture is in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import zygote

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "workers" / "groundtruth" / "manifest.json"


def cli_env_at(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMAUDIT_")}
    env["MEMAUDIT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    return env


def memaudit(env: dict[str, str], *args: str, timeout: float = 900, fresh: bool = False) -> subprocess.CompletedProcess:
    """`memaudit <args>` in a process of its own, its output captured. Forked from the suite's zygote (the
    interpreter start and the imports of torch, transformers and the app shared: 4-8 CPU-s a command; from
    ``app.cli.main`` on it is the command's own process: tests/support/zygote.py, ``run_cli``), or with ``fresh`` a
    new interpreter, for a test of what the imports print, and wherever ``env`` sets a PYTHON* variable of its own
    (PYTHONPATH's sitecustomize hiding a package acts at the interpreter's start), or MEMAUDIT_TEST_FORK_WORKERS=0."""
    interpreter = {k: v for k, v in env.items() if k.startswith("PYTHON")} != {
        k: v for k, v in os.environ.items() if k.startswith("PYTHON")
    }
    if fresh or interpreter or not zygote.ENABLED:
        return subprocess.run(
            [sys.executable, "-m", "app.cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
    return zygote.run_cli(list(args), env, REPO, timeout)
