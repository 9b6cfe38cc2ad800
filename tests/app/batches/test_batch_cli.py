"""`memaudit batch submit` as a user runs it, on the embedded default (SQLite, in-process worker): a roster file in,
a progress bar over the batch, the cohort report out; a roster with bad rows lists them and creates nothing."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from tests.support.cli import MANIFEST, memaudit


def write_roster(path: Path, people: list[dict]) -> Path:
    pids = sorted({pid for p in people for pid in p["facts"]}, key=lambda p: int(p[1:]))
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", *pids])
        for p in people:
            w.writerow([p["name"], *[p["facts"].get(pid, [""])[0] for pid in pids]])
    return path


def test_batch_submit_shows_progress_and_prints_the_report(cli_env, tmp_path):
    people = json.loads(MANIFEST.read_text())["trained"][:3]
    roster = write_roster(tmp_path / "people.csv", people)
    done = memaudit(
        cli_env,
        "batch",
        "submit",
        str(roster),
        "--model",
        "groundtruth-tiny",
        "--paraphrases",
        "1",
        "--counterfactuals",
        "10",
        "--report",
        "--json",  # the report's JSON (without it: its tables)
    )
    assert done.returncode == 0, done.stderr
    assert "3 people x 1 models" in done.stderr and "3/3 audits" in done.stderr
    report = json.loads(done.stdout)
    assert report["cohorts"]["groundtruth-tiny"]["cohort"]["subjects"] == 3


def test_batch_submit_lists_bad_rows_and_creates_nothing(cli_env, tmp_path):
    roster = tmp_path / "bad.csv"
    roster.write_text("name,P106\nGood Person,physicist\n,physicist\nSecret Person,=cmd()\n")
    done = memaudit(cli_env, "batch", "submit", str(roster), "--model", "groundtruth-tiny")
    assert done.returncode == 2
    assert "row 2: name:" in done.stderr and "row 3: P106:" in done.stderr
    assert "Secret" not in done.stderr and "cmd()" not in done.stderr


def test_batch_submit_to_a_remote_api(live_api, tmp_path):
    from tests.conftest import make_key

    api, key = live_api(), make_key("auditor")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMAUDIT_")}
    people = json.loads(MANIFEST.read_text())["trained"][:2]
    roster = write_roster(tmp_path / "people.csv", people)
    remote = ("--api-url", api.url, "--api-key", key)
    done = memaudit(
        env,
        "batch",
        "submit",
        str(roster),
        "--model",
        "groundtruth-tiny",
        "--compare",
        "smollm2-135m",
        "--no-wait",
        *remote,
    )
    assert done.returncode == 0, done.stderr
    batch = json.loads(done.stdout)
    assert batch["models"] == ["groundtruth-tiny", "smollm2-135m"] and batch["progress"]["total"] == 4
    status = json.loads(memaudit(env, "batch", "status", batch["id"], *remote).stdout)
    assert status["id"] == batch["id"]
    bad = tmp_path / "bad.csv"
    bad.write_text("name,P106\nGood Person,physicist\n,physicist\nSecret Person,=cmd()\n")
    done = memaudit(env, "batch", "submit", str(bad), "--model", "groundtruth-tiny", *remote)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and lines[0].startswith("memaudit: 2 of 3 roster rows are invalid"), done.stderr
    assert lines[1].startswith("  row 2: name:") and lines[2].startswith("  row 3: P106:"), done.stderr  # one a line
    assert "Secret" not in done.stderr and "cmd()" not in done.stderr
