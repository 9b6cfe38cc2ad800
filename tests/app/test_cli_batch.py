"""`memaudit batch report ID` as a user runs it: a batch of two people (one the ground-truth model was trained on,
one it never saw) audited locally, then its report printed as tables (the dashboard's batch page in text), and as
the API's JSON with --json."""

from __future__ import annotations

import json

from tests.support.cli import MANIFEST, memaudit

PROPERTIES = ("P106", "P27", "P19")


def test_batch_report_prints_tables_and_json(cli_env, tmp_path):
    manifest = json.loads(MANIFEST.read_text())
    people = [manifest["trained"][0], manifest["held_out"][0]]
    lines = ["name," + ",".join(PROPERTIES)]
    lines += [p["name"] + "," + ",".join(p["facts"][pid][0] for pid in PROPERTIES) for p in people]
    roster = tmp_path / "roster.csv"
    roster.write_text("\n".join(lines) + "\n")
    run = memaudit(cli_env, "batch", "submit", str(roster), "--model", "groundtruth-tiny", "--counterfactuals", "40")
    assert run.returncode == 0, run.stderr[-2000:]
    batch_id = json.loads(run.stdout)["id"]

    shown = memaudit(cli_env, "batch", "report", batch_id)
    assert shown.returncode == 0, shown.stderr[-2000:]
    text = shown.stdout
    assert text.startswith(f"batch {batch_id}: 2 people on groundtruth-tiny, finished"), text
    assert "audits: 2/2 done (2 succeeded" in text and "== groundtruth-tiny" in text
    # the cohort beside the null, one row per statistic, and one row per property
    (header,) = [line for line in text.splitlines() if line.startswith("statistic")]
    assert header.split() == ["statistic", "cohort", "null"]
    assert "lenient: some template at rank 1" in text and "100%" in text  # the trained person's facts rank first
    for pid in PROPERTIES:
        assert any(line.split()[:2] == [pid, "2"] for line in text.splitlines()), (pid, text)
    assert not text.lstrip().startswith("{")

    raw = memaudit(cli_env, "batch", "report", batch_id, "--json")
    report = json.loads(raw.stdout)
    assert report["batch_id"] == batch_id and report["cohorts"]["groundtruth-tiny"]["cohort"]["subjects"] == 2
