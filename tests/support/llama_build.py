"""llama-cpp-python built in the background while the suite runs (`make test`): compiling llama.cpp takes 15-30
minutes on a 2-core machine the first time, and only the served-model tests need it.

``python -m tests.support.llama_build start DIR -- COMMAND...`` starts COMMAND (the Makefile's build, unchanged:
the same CMAKE_ARGS and pip cache, so a later build is seconds) detached, niced, its output in ``DIR/build.log``;
it writes ``DIR/status`` (the exit code) when done. The served-model fixture calls :func:`wait` before it needs
llama_cpp: a bounded wait, then a clear error naming the log. With no build started, nothing waits (a virtualenv
where llama-cpp-python was installed otherwise, or is missing: the served tests are then skipped)."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / "var" / "llama-build"
WAIT_SECONDS = float(os.environ.get("MEMAUDIT_LLAMA_BUILD_WAIT", 3600))  # a fresh build: 15-28 min measured


@dataclass(frozen=True)
class Build:
    directory: Path

    @property
    def log(self) -> Path:
        return self.directory / "build.log"

    @property
    def status(self) -> Path:
        return self.directory / "status"

    @property
    def pid(self) -> Path:
        return self.directory / "pid"

    def started(self) -> bool:
        return self.pid.exists()

    def exit_code(self) -> int | None:
        """The build's exit code once it has ended; None while it runs (or was never started)."""
        try:
            return int(self.status.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def running(self) -> bool:
        if not self.started() or self.exit_code() is not None:
            return False
        try:
            os.kill(int(self.pid.read_text()), 0)
        except (ProcessLookupError, ValueError):
            return False
        except PermissionError:
            return True
        return True

    def tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"


def build(directory: Path | None = None) -> Build:
    return Build(Path(os.environ.get("MEMAUDIT_LLAMA_BUILD_DIR") or directory or DEFAULT_DIR))


def started() -> bool:
    """A background build was started (it may have ended since): the served tests wait for it and report how it
    ended instead of being skipped."""
    return build().started()


def wait(timeout: float = WAIT_SECONDS, poll: float = 5.0) -> None:
    """Return once no background build is running and the last one succeeded; raise RuntimeError (with the log's
    path and its end) if it failed, died or is still running after ``timeout`` seconds."""
    b = build()
    if not b.started():
        return
    deadline = time.monotonic() + timeout
    while b.running():
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the background build of llama-cpp-python is still running after {timeout:.0f} s"
                f" (MEMAUDIT_LLAMA_BUILD_WAIT); its log: {b.log}"
            )
        time.sleep(poll)
    code = b.exit_code()
    if code is None:
        raise RuntimeError(f"the background build of llama-cpp-python was interrupted; its log: {b.log}\n{b.tail()}")
    if code != 0:
        raise RuntimeError(
            f"the background build of llama-cpp-python failed (exit {code}); its log: {b.log}\n{b.tail()}"
        )
    importlib.invalidate_caches()  # llama_cpp appeared after this interpreter first looked for it


def start(directory: Path, command: list[str]) -> Build:
    """Start ``command`` detached (its own session, niced), after any build this directory still runs."""
    b = Build(directory)
    if b.running():
        print(f"llama-cpp-python: a background build is already running (log: {b.log})", file=sys.stderr)
        return b
    directory.mkdir(parents=True, exist_ok=True)
    b.status.unlink(missing_ok=True)
    runner = [sys.executable, "-m", "tests.support.llama_build", "run", str(directory), "--", *command]
    proc = subprocess.Popen(  # noqa: S603 (the Makefile's own build command)
        ["nice", "-n", "10", *runner],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    b.pid.write_text(str(proc.pid))
    print(f"llama-cpp-python: building in the background while the tests run (log: {b.log})", file=sys.stderr)
    return b


def run(directory: Path, command: list[str]) -> int:
    """The detached side: run the build, its output to the log, then write its exit code."""
    b = Build(directory)
    with b.log.open("w") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
    partial = b.status.with_suffix(".partial")
    partial.write_text(f"{code}\n")
    partial.rename(b.status)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.llama_build")
    parser.add_argument("action", choices=["start", "run", "wait"])
    parser.add_argument("directory", type=Path, nargs="?", default=DEFAULT_DIR)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.action == "start":
        start(args.directory, command)
        return 0
    if args.action == "run":
        return run(args.directory, command)
    os.environ.setdefault("MEMAUDIT_LLAMA_BUILD_DIR", str(args.directory))
    wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
