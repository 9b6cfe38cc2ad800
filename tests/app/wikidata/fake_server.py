"""A loopback HTTP server that answers like Wikidata's api.php (wbgetentities), from hand-written recordings."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from tests.app.wikidata.recorded import BERLIN, DOUGLAS_ADAMS, label_entities

SUBJECTS = {"Q42": DOUGLAS_ADAMS, "Q64": BERLIN}


class FakeWikidata:
    """Serves /w/api.php; ``fail_next`` requests answer 503 first (to exercise retries); every answer waits
    ``delay`` seconds (a slow Wikidata)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.fail_next = 0
        self.fail_status = 503
        self.delay = 0.0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
                owner.requests.append({"query": query, "user_agent": self.headers.get("User-Agent")})
                time.sleep(owner.delay)
                if owner.fail_next > 0:
                    owner.fail_next -= 1
                    self._send(owner.fail_status, {"error": "overloaded"})
                    return
                self._send(200, owner.answer(query))

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/w/api.php"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> FakeWikidata:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, query: dict) -> dict:
        assert query.get("action") == "wbgetentities" and query.get("format") == "json", query
        ids = query["ids"].split("|")
        if query.get("props") == "labels":
            return {"entities": label_entities(ids), "success": 1}
        if ids == ["Q0"]:
            return {"error": {"code": "no-such-entity", "info": 'Could not find an entity with the ID "Q0".'}}
        return {"entities": {q: SUBJECTS.get(q, {"id": q, "missing": ""}) for q in ids}, "success": 1}
