"""`memaudit batch submit --report` and `memaudit batch report ID` as a user runs them: a batch of two people (one
the ground-truth model was trained on, one it never saw) audited locally, then its report printed as tables (the
dashboard's batch page in text), and as the API's JSON with --json."""

from __future__ import annotations

import json
import re

from tests.support.cli import MANIFEST, memaudit

PROPERTIES = ("P106", "P27", "P19")


def test_batch_report_prints_tables_and_json(cli_env, tmp_path):
    manifest = json.loads(MANIFEST.read_text())
    people = [manifest["trained"][0], manifest["held_out"][0]]
    lines = ["name," + ",".join(PROPERTIES)]
    lines += [p["name"] + "," + ",".join(p["facts"][pid][0] for pid in PROPERTIES) for p in people]
    roster = tmp_path / "roster.csv"
    roster.write_text("\n".join(lines) + "\n")
    submit = ("batch", "submit", str(roster), "--model", "groundtruth-tiny", "--counterfactuals", "40", "--report")
    run = memaudit(cli_env, *submit)
    assert run.stdout.strip(), run.stderr[-2000:]
    batch_id = re.search(r"^batch ([0-9a-f-]+): 2 people", run.stderr, re.M).group(1)
    # --report prints the report's tables when the batch has finished, as `batch report` does
    assert run.stdout.startswith(f"batch {batch_id}: 2 people on groundtruth-tiny, finished"), run.stdout
    assert "== groundtruth-tiny" in run.stdout and not run.stdout.lstrip().startswith("{")
    assert "\r" not in run.stderr, "a redirected progress bar draws no frames (plain lines instead)"

    raw = memaudit(cli_env, "batch", "report", batch_id, "--json")
    report = json.loads(raw.stdout)  # the API's JSON, as before
    assert report["batch_id"] == batch_id and report["cohorts"]["groundtruth-tiny"]["cohort"]["subjects"] == 2
    cohort = report["cohorts"]["groundtruth-tiny"]

    shown = memaudit(cli_env, "batch", "report", batch_id)
    assert shown.returncode == 0, shown.stderr[-2000:]
    text, lines = shown.stdout, shown.stdout.splitlines()
    assert text.startswith(f"batch {batch_id}: 2 people on groundtruth-tiny, finished"), text
    assert "audits: 2/2 done (2 succeeded" in text and "== groundtruth-tiny" in text
    assert not text.lstrip().startswith("{")
    # the cohort beside the null, one row per statistic, the numbers of the JSON
    (header,) = [line for line in lines if line.startswith("statistic")]
    assert header.split() == ["statistic", "cohort", "null"]
    (lenient,) = [line for line in lines if line.startswith("rank1_any: some template ranks it 1st")]
    assert lenient.split()[-2] == f"{100 * cohort['cohort']['lenient']:.0f}%", lenient
    assert cohort["cohort"]["lenient"] >= 0.5  # the trained person's facts rank first under some template
    # one row per property: its facts and M̄
    for pid in PROPERTIES:
        (row,) = [line.split() for line in lines if line.split()[:1] == [pid]]
        assert row[1] == "2" and row[2] == f"{100 * cohort['per_property'][pid]['mean_share']:.0f}%", row
    # the submitting process exits cleanly too (the embedded runner hands the batch's null back at exit)
    assert run.returncode == 0, run.stderr[-2000:]
