"""Real PostgreSQL and Redis servers on loopback, started in temporary directories for a test session.

PostgreSQL refuses to run as root: as root, the cluster is created and run as the `postgres` user that
Debian's package creates."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PG_BIN_DIRS = [Path("/usr/lib/postgresql") / v / "bin" for v in ("17", "16", "15", "14", "13")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin(name: str) -> str:
    for d in PG_BIN_DIRS:
        if (d / name).exists():
            return str(d / name)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found: install Debian's postgresql package (apt-get install postgresql)")
    return found


def _as_db_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not start in {timeout} s")


@dataclass
class Postgres:
    root: Path
    port: int

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, db: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{db}"

    def _admin(self, sql: str, *params: str) -> list[tuple]:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as c:
            cursor = c.execute(sql, params or None)
            return cursor.fetchall() if cursor.description else []

    def create_database(self, name: str, template: str | None = None) -> str:
        """A new database, empty or a copy of ``template`` (which nobody may be connected to meanwhile)."""
        self._admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def has_database(self, name: str) -> bool:
        return bool(self._admin("SELECT 1 FROM pg_database WHERE datname = %s", name))

    def rename_database(self, old: str, new: str) -> None:
        self._admin(f'ALTER DATABASE "{old}" RENAME TO "{new}"')

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        subprocess.run(
            _as_db_user(
                [
                    _pg_bin("pg_ctl"),
                    "-D",
                    str(self.root / "data"),
                    "-o",
                    opts,
                    "-l",
                    str(self.root / "log"),
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        _wait_port(self.port)

    def kill(self) -> None:
        """Stop at once, as a crash would (no checkpoint; connections drop); ``start`` recovers."""
        subprocess.run(
            _as_db_user([_pg_bin("pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop"]),
            capture_output=True,
        )

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> Postgres:
    root = Path(tempfile.mkdtemp(prefix="memaudit-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    subprocess.run(
        _as_db_user([_pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]),
        check=True,
        capture_output=True,
    )
    pg = Postgres(root, free_port())
    pg.start()
    return pg


@dataclass
class Redis:
    proc: subprocess.Popen
    port: int
    root: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        """Stop at once; with no persistence configured, everything Redis held is lost."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def start(self) -> None:
        """(Re)start on the same port, empty."""
        self.proc = _redis_process(self.port, self.root)
        _wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def _redis_process(port: int, root: Path) -> subprocess.Popen:
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise RuntimeError("redis-server not found: install Debian's redis-server package")
    return subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start_redis() -> Redis:
    root = Path(tempfile.mkdtemp(prefix="memaudit-redis-"))
    port = free_port()
    proc = _redis_process(port, root)
    _wait_port(port)
    return Redis(proc, port, root)


def wait_healthy(base_url: str, timeout: float = 120.0) -> None:
    """Wait (bounded) until a started API answers GET /health with 200."""
    import httpx

    from tests.support import loopback

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if loopback.get(f"{base_url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the API at {base_url} did not answer /health within {timeout:.0f} s")
