"""`memaudit --help` starts in a fraction of a second: the command line imports only what the command being run needs
(app.cli.COMMANDS names each command's module; docs/benchmarks.md, "CLI start-up")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.cli import COMMANDS, build_parser, command_of
from tests.support.cli import REPO

HEAVY = (
    "fastapi",
    "starlette",
    "pydantic",
    "pydantic_settings",
    "sqlalchemy",
    "redis",
    "rq",
    "httpx",
    "torch",
    "numpy",
)


def imported_by(*args: str) -> set[str]:
    """The top-level packages a `memaudit` process imports (from `python -X importtime`)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "app.cli", *args], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {line.split("|")[-1].strip().split(".")[0] for line in run.stderr.splitlines() if "|" in line}


def test_help_imports_no_web_database_or_model_library():
    assert not set(HEAVY) & imported_by("--help")


def test_a_command_imports_its_libraries_when_it_runs():
    assert not set(HEAVY) & imported_by("keys", "list", "--help")  # its database code is imported by cmd_keys
    assert "pydantic" in imported_by("audit", "--help")  # its options' defaults come from the settings


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_builds_alone_and_in_the_whole_parser(name, capsys):
    whole = build_parser()
    assert set(whole._subparsers._group_actions[0].choices) == set(COMMANDS)
    with pytest.raises(SystemExit) as done:
        build_parser(command_of(["-v", name, "--help"])).parse_args(["-v", name, "--help"])
    assert done.value.code == 0
    assert f"usage: memaudit {name}" in capsys.readouterr().out


def test_an_unknown_command_is_refused_with_the_list(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser(command_of(["nope"])).parse_args(["nope"])
    assert done.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_a_one_shot_audit_exits_promptly_after_its_table(cli_env):
    """`memaudit audit` printed its table, then took 9-31 s to exit: the interpreter's last garbage collection walked
    everything the command had loaded (a model, transformers, the null). The command line freezes those objects
    once the command is done (app.cli.main), so the process ends within seconds of its last line."""
    import time

    args = [sys.executable, "-m", "app.cli", "audit", "--name", "Yselda Calderwick", "--fact", "P106=statistician"]
    args += ["--model", "groundtruth-tiny", "--paraphrases", "0", "--null-wait", "0"]
    proc = subprocess.Popen(args, cwd=REPO, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    last = time.monotonic()
    for _ in proc.stdout:
        last = time.monotonic()
    proc.wait(timeout=600)
    assert proc.returncode == 0
    assert time.monotonic() - last < 4.0, f"{time.monotonic() - last:.1f} s between the last line and the exit"
