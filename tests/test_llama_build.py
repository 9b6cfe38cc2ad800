"""`make test` compiles llama-cpp-python in the background (tests/support/llama_build.py) while the suite runs: the
served-model fixture waits for the build, bounded, and a failed build is an error that names its log. The Makefile
keeps the compile out of install-test's foreground."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import llama_build

REPO = Path(__file__).resolve().parent.parent


def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> llama_build.Build:
    monkeypatch.setenv("MEMAUDIT_LLAMA_BUILD_DIR", str(tmp_path))
    return llama_build.start(tmp_path, ["sh", "-c", script])


def test_no_build_started_nothing_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAUDIT_LLAMA_BUILD_DIR", str(tmp_path / "none"))
    assert not llama_build.started()
    llama_build.wait(timeout=0)


def test_the_fixture_waits_for_a_build_that_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = started(tmp_path, monkeypatch, "sleep 2; echo built")
    assert llama_build.started() and build.running()
    began = time.monotonic()
    llama_build.wait(timeout=60, poll=0.2)
    assert time.monotonic() - began >= 1 and build.exit_code() == 0
    assert "built" in build.log.read_text()


def test_a_failed_build_is_an_error_naming_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = started(tmp_path, monkeypatch, "echo 'error: cmake failed'; exit 3")
    with pytest.raises(RuntimeError, match=r"failed \(exit 3\)") as caught:
        llama_build.wait(timeout=60, poll=0.2)
    assert str(build.log) in str(caught.value) and "cmake failed" in str(caught.value)


def test_the_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = started(tmp_path, monkeypatch, "sleep 30")
    try:
        with pytest.raises(RuntimeError, match="still running after 1 s") as caught:
            llama_build.wait(timeout=1, poll=0.2)
        assert str(build.log) in str(caught.value)
    finally:
        subprocess.run(["pkill", "-TERM", "-s", build.pid.read_text().strip()], check=False)


def test_make_test_starts_the_compile_in_the_background_not_before_the_first_test() -> None:
    dry = subprocess.run(
        ["make", "-n", "test", "PYTHON=python3", "LLAMA_BUILD_DIR=/tmp/x"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = dry.splitlines()
    compile_lines = [i for i, line in enumerate(lines) if "CMAKE_ARGS=" in line]
    assert len(compile_lines) == 1, dry
    assert "tests.support.llama_build start" in lines[compile_lines[0]], "the compile runs in the background"
    # the vendored wheel first, in the foreground: where it loads, nothing runs in the background and the served
    # files are scheduled by their length (tests/conftest.py)
    wheel_line = next(i for i, line in enumerate(lines) if "install -q --force-reinstall --no-deps vendor/" in line)
    assert lines[wheel_line].lstrip().startswith("if ") and wheel_line < compile_lines[0], dry
    pytest_line = next(i for i, line in enumerate(lines) if re.search(r"-m pytest\b", line))
    assert compile_lines[0] < pytest_line
