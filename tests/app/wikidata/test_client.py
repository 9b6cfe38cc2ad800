"""The Wikidata client against a loopback HTTP server that answers in wbgetentities' real format."""

from __future__ import annotations

import socket
import ssl

import pytest

from app.wikidata.client import (
    USER_AGENT,
    EntityNotFound,
    InvalidWikidataId,
    NotHuman,
    WikidataClient,
    WikidataUnavailable,
)
from tests.app.wikidata.fake_server import FakeWikidata


@pytest.fixture
def wikidata():
    fake = FakeWikidata().start()
    yield fake
    fake.stop()


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


def test_the_clients_share_one_tls_context_that_still_checks_certificates():
    """One TLS context per process for the Wikidata clients and the served models' clients (httpx builds one per
    client otherwise: ~35 ms of CPU, parsing certifi's bundle), and sharing it turned no check off."""
    from app.wikidata.client import tls_context
    from workers.lm.served_client import tls_context as served_tls_context

    for shared in (tls_context, served_tls_context):
        context = shared()
        assert context is shared()
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert context.cert_store_stats()["x509_ca"] > 0  # certifi's authorities are loaded
