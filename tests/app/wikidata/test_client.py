"""The Wikidata client against a loopback HTTP server that answers in wbgetentities' real format."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from app.wikidata.client import (
    USER_AGENT,
    EntityNotFound,
    InvalidWikidataId,
    NotHuman,
    WikidataClient,
    WikidataUnavailable,
)
from tests.app.wikidata.recorded import BERLIN, DOUGLAS_ADAMS, label_entities

SUBJECTS = {"Q42": DOUGLAS_ADAMS, "Q64": BERLIN}


class FakeWikidata:
    """Serves /w/api.php; ``fail_next`` requests answer 503 first (to exercise retries)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.fail_next = 0
        self.fail_status = 503
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
                owner.requests.append({"query": query, "user_agent": self.headers.get("User-Agent")})
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

    def answer(self, query: dict) -> dict:
        assert query.get("action") == "wbgetentities" and query.get("format") == "json", query
        ids = query["ids"].split("|")
        if query.get("props") == "labels":
            return {"entities": label_entities(ids), "success": 1}
        if ids == ["Q0"]:
            return {"error": {"code": "no-such-entity", "info": 'Could not find an entity with the ID "Q0".'}}
        return {"entities": {q: SUBJECTS.get(q, {"id": q, "missing": ""}) for q in ids}, "success": 1}


@pytest.fixture
def wikidata():
    fake = FakeWikidata()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def make_client(url: str, **kw) -> WikidataClient:
    return WikidataClient(url, timeout=2.0, backoff=0.01, **kw)


def test_fetches_a_humans_catalog_facts_with_resolved_labels(wikidata):
    with make_client(wikidata.url) as client:
        subject = client.fetch_subject("Q42")
    assert subject.qid == "Q42" and subject.name == "Douglas Adams" and subject.is_human
    facts = set(subject.facts)
    expected = {
        ("P21", "male"),
        ("P27", "United Kingdom"),
        ("P19", "Cambridge"),
        ("P106", "novelist"),
        ("P106", "screenwriter"),
        ("P1412", "English"),
        ("P569", "11 March 1952"),
        ("P570", "11 May 2001"),
        ("P2048", "196 centimetres"),
    }
    assert facts == expected, f"unexpected facts: extra {facts - expected}, missing {expected - facts}"
    assert ("P106", "writer") not in facts, "deprecated statements must be ignored"
    assert subject.unresolved == 1, "the item without an English label is counted, not invented"


def test_sends_a_polite_user_agent_and_resolves_labels_in_a_second_call(wikidata):
    with make_client(wikidata.url) as client:
        client.fetch_subject("q42")
    assert len(wikidata.requests) == 2, wikidata.requests
    assert all(r["user_agent"] == USER_AGENT for r in wikidata.requests)
    second = wikidata.requests[1]["query"]
    assert second["props"] == "labels" and "Q6625963" in second["ids"].split("|")


def test_not_a_human_is_refused(wikidata):
    with make_client(wikidata.url) as client, pytest.raises(NotHuman, match="Q64"):
        client.fetch_subject("Q64")


@pytest.mark.parametrize("qid", ["Q999999999", "Q0"])
def test_missing_entity_is_reported(wikidata, qid):
    with make_client(wikidata.url) as client, pytest.raises((EntityNotFound, InvalidWikidataId)):
        client.fetch_subject(qid)


def test_malformed_ids_never_reach_the_network(wikidata):
    with make_client(wikidata.url) as client:
        for bad in ["42", "P31", "Q42|Q64", "", "Q 42"]:
            with pytest.raises(InvalidWikidataId):
                client.fetch_subject(bad)
    assert wikidata.requests == []


def test_retries_transient_failures_then_succeeds(wikidata):
    wikidata.fail_next = 2
    with make_client(wikidata.url, retries=3) as client:
        subject = client.fetch_subject("Q42")
    assert subject.name == "Douglas Adams"
    assert len(wikidata.requests) == 4, "2 failures + entity call + label call"


def test_gives_up_after_the_retry_budget(wikidata):
    wikidata.fail_next = 10
    with make_client(wikidata.url, retries=2) as client, pytest.raises(WikidataUnavailable, match="3 attempts"):
        client.fetch_subject("Q42")
    assert len(wikidata.requests) == 3


def test_unreachable_api_is_reported_as_unavailable():
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/w/api.php"
    with make_client(url, retries=1) as client, pytest.raises(WikidataUnavailable, match="unreachable"):
        client.fetch_subject("Q42")
