"""The suite's zygote (tests/support/zygote.py) may share with its forked workers and APIs only what no setting
changes: what it imports before forking reads no settings and starts no thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.zygote import app_main_imports

REPO = Path(__file__).resolve().parents[1]


def test_the_zygote_preimports_what_app_main_imports_without_reading_settings():
    modules = app_main_imports()
    assert {"app.audits.router", "app.ui.router", "app.middleware", "app.settings"} <= set(modules)
    assert "app.main" not in modules  # it builds the app from the settings at import: each child imports it
    script = (
        "import importlib, json, os, sys\n"
        "from app.settings import get_settings\n"
        "for m in sys.argv[1:]: importlib.import_module(m)\n"
        "import app.migrate\n"
        "from core.names.lookalikes import prepare_reader; prepare_reader()\n"
        "print(json.dumps({'settings_read': get_settings._value is not None,"
        " 'threads': len(os.listdir('/proc/self/task'))}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMAUDIT_")} | {"OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-c", script, *modules], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == {"settings_read": False, "threads": 1}
