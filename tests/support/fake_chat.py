"""A loopback HTTP server that answers like an OpenAI-compatible endpoint (``/v1/chat/completions`` and
``/v1/completions``), with scripted faults: the next requests can answer 429 with ``Retry-After``, 500, a body that is
not JSON, JSON without choices, the wrong number of choices, or nothing until the client times out.

A good answer is computed from the request, so a test can tell which prompt and which seed an answer belongs to:
answer k of a request is ``"<last message or prompt> | seed <seed> | answer <k>"``; ``usage`` reports 3 prompt tokens
and 2 completion tokens per answer. ``ignore_n`` answers one choice whatever ``n`` asks (llama-cpp-python does);
``fail_asking`` fails every request whose body holds all of its strings (one fact's prompt)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("429", "500", "garbage", "no-choices", "wrong-n", "timeout", "401")


class FakeChat:
    def __init__(self, *, ignore_n: bool = False, retry_after: str = "1", hang_s: float = 3.0) -> None:
        self.faults: list[str] = []  # consumed one per request, in order
        self.always: str | None = None  # a fault for every request once ``faults`` is empty
        self.fail_asking: tuple[str, ...] = ()  # 500 for every request whose prompt holds all of these strings
        self.ignore_n = ignore_n
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.requests: list[dict[str, Any]] = []  # path, body, authorization, time
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                with owner._lock:
                    owner.requests.append(
                        {
                            "path": self.path,
                            "body": body,
                            "authorization": self.headers.get("authorization"),
                            "time": time.monotonic(),
                        }
                    )
                    fault = owner.faults.pop(0) if owner.faults else owner.always
                    if owner.fail_asking and all(part in json.dumps(body) for part in owner.fail_asking):
                        fault = "500"
                owner.reply(self, fault, body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply(self, handler: BaseHTTPRequestHandler, fault: str | None, body: dict[str, Any]) -> None:
        if fault == "timeout":
            time.sleep(self.hang_s)
            return _send(handler, 200, b"{}")
        if fault in ("429", "500", "401"):
            headers = {"Retry-After": self.retry_after} if fault == "429" else {}
            return _send(handler, int(fault), b'{"error": {"message": "try later"}}', headers)
        if fault == "garbage":
            return _send(handler, 200, b"<html>502 Bad Gateway</html>")
        if fault == "no-choices":
            return _send(handler, 200, json.dumps({"object": "error"}).encode())
        n = 1 if self.ignore_n else int(body.get("n") or 1)
        if fault == "wrong-n":
            n += 1
        return _send(handler, 200, json.dumps(answer(handler.path, body, n)).encode())


def answer(path: str, body: dict[str, Any], n: int) -> dict[str, Any]:
    asked = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
    texts = [f"{asked} | seed {body.get('seed')} | answer {k}" for k in range(n)]
    if path.endswith("/chat/completions"):
        choices = [_chat_choice(k, text, body) for k, text in enumerate(texts)]
    else:
        choices = [_completion_choice(k, text, body) for k, text in enumerate(texts)]
    return {"choices": choices[::-1], "usage": {"prompt_tokens": 3, "completion_tokens": 2 * n}}  # any order


def _chat_choice(k: int, text: str, body: dict[str, Any]) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": k, "message": {"role": "assistant", "content": text}}
    if body.get("logprobs"):
        top = [{"token": "Yes", "logprob": -0.1}, {"token": "No", "logprob": -2.5}][: body.get("top_logprobs") or 1]
        choice["logprobs"] = {"content": [{"token": "Yes", "logprob": -0.1, "top_logprobs": top[::-1]}]}
    return choice


def _completion_choice(k: int, text: str, body: dict[str, Any]) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": k, "text": text}
    if body.get("logprobs"):
        choice["logprobs"] = {"tokens": ["Yes"], "token_logprobs": [-0.1], "top_logprobs": [{"No": -2.5, "Yes": -0.1}]}
    return choice


def _send(handler: BaseHTTPRequestHandler, status: int, content: bytes, headers: dict[str, str] | None = None) -> None:
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(content)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(content)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
        pass
