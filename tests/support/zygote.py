"""`memaudit worker` (and API) processes forked from a parent that has imported them already (a "zygote").

A suite run starts ~50 worker processes; each imported torch, transformers and the app before it took a job (3.5-4
CPU-s), then transformers' Llama modeling code with its first model (another 3.5-4 CPU-s): ~7 CPU-s and 5-10 s of a
test's wall time per worker, the largest share of the workers' own CPU. The zygote
imports those modules once per pytest process and forks one child per worker asked for. From its arguments on, the
child runs exactly what `python -m app.cli worker ...` runs (``app.cli.main``), with the environment, working
directory and log file the test gives it: a real, separate worker process with its own database and Redis
connections (the zygote opens none), signals and exit status. Only the interpreter start, the imports, the read
of the shipped nulls (package files) and the name-origin reader's tables (built from package files) are shared.

Fork safety: the zygote runs no torch operation, opens no connection and starts no thread before forking (checked at
start: it refuses to run with more than one thread), so the child inherits no lock held by another thread. To that
end numpy's OpenBLAS runs single-threaded in forked workers (OPENBLAS_NUM_THREADS=1: it would start a pool at
import); their scoring is torch's, whose threads MEMAUDIT_TORCH_THREADS sets as before.

The test side gets a ``Forked`` handle with the ``subprocess.Popen`` methods the suite uses (``pid``, ``poll``,
``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``; exit status as Popen gives it: ``-N`` for signal
N). The zygote reaps a child only when asked about that child, so its pid cannot be reused while a handle may still
signal it. ``MEMAUDIT_TEST_FORK_WORKERS=0`` starts workers as plain subprocesses instead (a comparison run)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENABLED = os.environ.get("MEMAUDIT_TEST_FORK_WORKERS", "1") != "0"


class Zygote:
    """The parent process (started on first use) and its request pipe; one per pytest process."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMAUDIT_")}
        env["OPENBLAS_NUM_THREADS"] = "1"  # numpy's OpenBLAS starts its thread pool at import; one thread: none
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=env,
            text=True,
        )
        self._lock = threading.Lock()
        ready = self._proc.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise RuntimeError(f"the worker zygote did not start: {ready!r} (exit {self._proc.poll()})")

    def _ask(self, request: dict) -> dict:
        with self._lock:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            answer = self._proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the worker zygote exited (status {self._proc.poll()})")
        return json.loads(answer)

    def spawn(
        self, module: str, args: list[str], env: dict[str, str], log_file: Path, cwd: Path = REPO, **more: str | bool
    ) -> Forked:
        """``more``: ``err`` (stderr's own file, else the log) and ``exit_as_interpreter`` (see :func:`_finish`)."""
        request = {"op": "spawn", "module": module, "args": args, "env": env, "log": str(log_file), "cwd": str(cwd)}
        return Forked(self._ask(request | more)["pid"], self, [module, *args])

    def status(self, pid: int) -> int | None:
        return self._ask({"op": "poll", "pid": pid})["returncode"]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=10)


class Forked:
    """A forked worker, used as a ``subprocess.Popen``."""

    def __init__(self, pid: int, zygote: Zygote, args: list[str]) -> None:
        self.pid, self.args, self.returncode = pid, args, None
        self._zygote = zygote

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped yet: the pid is still this child's
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


Process = subprocess.Popen | Forked  # what the suite's process helpers return

_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote:
    global _zygote
    with _zygote_lock:
        if _zygote is None or _zygote._proc.poll() is not None:
            _zygote = Zygote()
        return _zygote


MODULES = ("app.cli", "uvicorn")  # what a child can become: `python -m <module> <args>`


def start(
    args: list[str], env: dict[str, str], log_file: Path, cwd: Path = REPO, *, module: str = "app.cli"
) -> Process:
    """`python -m <module> <args>` (`memaudit <args>` by default; "uvicorn" for the API) with ``env`` as its whole
    environment, output appended to ``log_file``."""
    assert module in MODULES, module
    if ENABLED:
        return zygote().spawn(module, args, env, log_file, cwd)
    with log_file.open("a") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args], env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT
        )


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """`memaudit <args>` forked from the zygote, as ``subprocess.run([python, -m, app.cli, *args], env=env, cwd=cwd,
    capture_output=True, text=True, timeout=timeout)`` runs it: its stdout and stderr apart, stdin empty, killed
    at the timeout (TimeoutExpired), and its exit as the interpreter's (non-daemon threads joined, then the atexit
    callbacks: the embedded runner hands back what it holds). What differs: the imports were the zygote's, so a
    warning printed while importing is not in its stderr (a test of what a fresh process prints starts one)."""
    import tempfile

    command = [sys.executable, "-m", "app.cli", *args]
    with tempfile.TemporaryDirectory(prefix="memaudit-cli-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        child = zygote().spawn("app.cli", args, env, out, cwd, err=str(err), exit_as_interpreter=True)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise subprocess.TimeoutExpired(command, timeout) from None
        return subprocess.CompletedProcess(command, code, out.read_text(), err.read_text())


# --- the zygote process ---------------------------------------------------------------------------------------


def _child(request: dict) -> None:
    """In the forked child: become `memaudit <args>`; never returns."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        err = os.open(request["err"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if request.get("err") else log
        os.dup2(log, 1)
        os.dup2(err, 2)
        os.close(null)
        os.close(log)
        if err != log:
            os.close(err)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (fd 0 stays open for the process's life)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        # as a fresh interpreter has them: ^C raises KeyboardInterrupt (the zygote ignores it), SIGPIPE stays
        # ignored (Python's own start-up setting, inherited), SIGTERM is the default
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from app.settings import get_settings

        get_settings.cache_clear()  # read from this environment (the imports read none; this makes sure)
        sys.argv = [request["module"], *request["args"]]
        if request["module"] == "uvicorn":  # click: parses sys.argv, exits through SystemExit
            from uvicorn.main import main as uvicorn_main

            uvicorn_main(request["args"])
            code = 0
        else:
            from app.cli import main

            result = main(request["args"])
            code = result if isinstance(result, int) else 0
    except SystemExit as exc:  # as the interpreter does: an int is the status, anything else is printed (status 1)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (the child reports and exits like a crashed process)
        import traceback

        traceback.print_exc()
    finally:
        try:
            if request.get("exit_as_interpreter"):
                _finish()
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                stream.flush()
        finally:
            os._exit(code)


def _finish() -> None:
    """What the interpreter does at exit before it stops: wait for the non-daemon threads, then run the atexit
    callbacks (a worker child skips both: it leaves like a killed process after its loop)."""
    import atexit

    try:
        threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own call at exit
    finally:
        atexit._run_exitfuncs()


def app_main_imports() -> list[str]:
    """The modules app/main.py imports at its top level (read from its source, so the list follows the file)."""
    tree = ast.parse((REPO / "app" / "main.py").read_text(encoding="utf-8"))
    names = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module]
    return [*names, *(a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names)]


def _serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C reaches the children and pytest; the zygote ends at EOF
    # what loading the suite's models imports on first use (the ground-truth, items and SmolLM2 models are all
    # Llama-architecture): transformers' modeling code and fast tokenizers, 3.5-4 CPU-s of each worker's first job
    import transformers.models.llama.modeling_llama  # noqa: F401
    import uvicorn.main  # noqa: F401 (the API's server)
    from transformers import PreTrainedTokenizerFast  # noqa: F401

    import app.cli  # noqa: F401
    import app.migrate  # noqa: F401 (alembic: `memaudit serve`, `migrate` and every embedded database's start)
    import workers.lm.hf  # noqa: F401
    import workers.lm.loading  # noqa: F401
    import workers.worker  # noqa: F401 (torch, transformers, the kinds: what every worker imports)
    from app.nulls.shipped import shipped
    from core.names.lookalikes import prepare_reader

    for module in app_main_imports():  # app.main itself is imported by the child: it builds the app from the settings
        importlib.import_module(module)
    shipped()  # the package's null files, read and validated (~1 CPU-s): what every API and embedded start reads
    # the name-origin reader's tables (~0.7 CPU-s): what every API and worker builds at its first subject audit
    # (68 forked children built them in a suite run: ~60 CPU-s; docs/lab/2026-11-29-per-process-costs.md)
    prepare_reader()
    # what was imported, frozen out of every later collection here and in the children (tests/support/gc_pace.py)
    from tests.support import gc_pace

    gc_pace.freeze()

    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        print(json.dumps({"ready": False, "threads": threads}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _child(request)
            answer = {"pid": pid}
        else:
            done, status = os.waitpid(request["pid"], os.WNOHANG)
            answer = {"returncode": os.waitstatus_to_exitcode(status) if done else None}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    _serve()
