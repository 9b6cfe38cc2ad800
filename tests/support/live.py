"""A live API: `uvicorn app.main:app` in a subprocess on a free loopback port, its log in a file."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support import loopback, zygote
from tests.support.servers import free_port

REPO = Path(__file__).resolve().parents[2]


@dataclass
class LiveApi:
    proc: zygote.Process
    url: str
    log: Path

    def client(self, key: str | None = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return loopback.client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 60), **kw)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_api(env: dict[str, str], log: Path, *, timeout: float = 60.0) -> LiveApi:
    """Start the API with `env` (MEMAUDIT_* settings) and wait until /health answers 200."""
    port = free_port()
    args = ["app.main:app", "--host", "127.0.0.1", "--port", str(port)]
    # forked from this pytest process's zygote (tests/support/zygote.py): `python -m uvicorn <args>` without
    # importing the web stack again
    proc = zygote.start(args, {**os.environ, **env}, log, REPO, module="uvicorn")
    api = LiveApi(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the API exited with {proc.returncode}:\n{api.log_text()[-3000:]}")
        try:
            if loopback.get(f"{api.url}/health", timeout=2).status_code == 200:
                return api
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    api.stop()
    raise RuntimeError(f"the API did not answer /health in {timeout} s:\n{api.log_text()[-3000:]}")
