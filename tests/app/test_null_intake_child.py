"""Issue 44, item 3: `POST /nulls/import`'s child process lowers its CPU priority before it imports anything.

It used to import the web stack and SQLAlchemy (about 2 CPU-s) at the API's own priority and lower it only in
``main()``: on a busy 2-core machine `/health` waited up to 3.6 s during an import. The real command the API
spawns, with a module that reports how it was started."""

from __future__ import annotations

import json
import os
import subprocess

from app.nulls.intake import CHILD_NICENESS, child_command


def test_the_intake_child_is_niced_before_its_first_import():
    cmd = child_command("some-model", module="tests.support.child_start")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    started = json.loads(out.stdout.strip().splitlines()[-1])
    assert started == {
        "nice": min(19, os.nice(0) + CHILD_NICENESS),
        "already_imported": [],
        "argv": ["some-model"],
    }, (started, out.stderr)
