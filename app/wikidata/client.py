"""Fetch a human's facts from the Wikidata API (``wbgetentities``), restricted to the property catalog.

Two calls: the subject's labels and claims, then the English labels of the items its claims point to.
Errors carry the entity id only, never a name or a fact.
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import httpx

from app.wikidata.snaks import ItemRef, claim_values, entity_label, is_human
from core.catalog import Catalog, load_catalog

USER_AGENT = "memaudit/0.1 (https://github.com/memaudit/memaudit; privacy audits of language models) httpx"
QID_RE = re.compile(r"^Q[1-9][0-9]{0,11}$")
MAX_IDS_PER_CALL = 50  # wbgetentities' limit for anonymous clients
_RETRY_STATUS = {429, 500, 502, 503, 504}


class WikidataError(Exception):
    """Base class; messages are safe to show to the caller (they hold an entity id at most)."""


class InvalidWikidataId(WikidataError, ValueError):
    pass


class EntityNotFound(WikidataError):
    pass


class NotHuman(WikidataError):
    pass


class WikidataUnavailable(WikidataError):
    pass


@dataclass(frozen=True)
class WikidataSubject:
    qid: str
    name: str
    is_human: bool
    facts: tuple[tuple[str, str], ...]  # (pid, value label), catalog properties only
    unresolved: int = 0  # item values without an English label, left out of ``facts``


@cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every client of this process (a context is safe to share between threads): httpx builds
    one per ``Client`` otherwise, parsing certifi's CA bundle each time (~35 ms of CPU per audit submitted)."""
    return httpx.create_ssl_context()


class WikidataClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        user_agent: str = USER_AGENT,
        catalog: Catalog | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.catalog = catalog or load_catalog()
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            transport=transport,
            follow_redirects=True,
            verify=tls_context(),
        )

    def __enter__(self) -> WikidataClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def fetch_subject(self, qid: str, *, require_human: bool = True) -> WikidataSubject:
        qid = validate_qid(qid)
        entity = self._get_entities([qid], props="labels|claims").get(qid)
        if entity is None or "missing" in entity:
            raise EntityNotFound(f"Wikidata has no entity {qid}")
        human = is_human(entity)
        if require_human and not human:
            raise NotHuman(f"Wikidata entity {qid} is not a human (P31 = Q5)")
        value_types = {p.pid: p.value_type for p in self.catalog}
        raw_facts = claim_values(entity.get("claims") or {}, self.catalog.pids, value_types)
        labels = self.item_labels(v.qid for _, v in raw_facts if isinstance(v, ItemRef))
        facts, unresolved = [], 0
        for pid, value in raw_facts:
            text = labels.get(value.qid) if isinstance(value, ItemRef) else value
            if text:
                facts.append((pid, text))
            else:
                unresolved += 1
        name = entity_label(entity) or qid
        return WikidataSubject(qid=qid, name=name, is_human=human, facts=tuple(facts), unresolved=unresolved)

    def item_labels(self, qids: Iterable[str]) -> dict[str, str]:
        wanted = sorted(set(qids))
        labels: dict[str, str] = {}
        for start in range(0, len(wanted), MAX_IDS_PER_CALL):
            chunk = wanted[start : start + MAX_IDS_PER_CALL]
            for qid, entity in self._get_entities(chunk, props="labels").items():
                label = entity_label(entity) if "missing" not in entity else None
                if label:
                    labels[qid] = label
        return labels

    def _get_entities(self, ids: Sequence[str], *, props: str) -> dict[str, dict]:
        params = {
            "action": "wbgetentities",
            "ids": "|".join(ids),
            "props": props,
            "languages": "en|mul",
            "format": "json",
        }
        body = self._get_json(params)
        error = body.get("error")
        if error:
            if error.get("code") == "no-such-entity":
                raise EntityNotFound(f"Wikidata has no entity {'|'.join(ids)}"[:200])
            raise WikidataUnavailable(f"Wikidata API error: {str(error.get('code', 'unknown'))[:80]}")
        entities = body.get("entities")
        if not isinstance(entities, dict):
            raise WikidataUnavailable("Wikidata API answered without an 'entities' object")
        return entities

    def _get_json(self, params: dict[str, str]) -> dict:
        last, retry_after = "no attempt made", None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self._delay(attempt, retry_after))
                retry_after = None
            try:
                response = self._http.get(self.base_url, params=params)
            except httpx.TransportError as exc:  # timeouts, refused connections, DNS failures
                last = type(exc).__name__
                continue
            if response.status_code in _RETRY_STATUS:
                last = f"HTTP {response.status_code}"
                retry_after = response.headers.get("Retry-After")
                continue
            if response.status_code != 200:
                raise WikidataUnavailable(f"Wikidata API answered HTTP {response.status_code}")
            try:
                body = response.json()
            except ValueError:
                raise WikidataUnavailable("Wikidata API answered with something that is not JSON") from None
            if not isinstance(body, dict):
                raise WikidataUnavailable("Wikidata API answered with an unexpected JSON document")
            return body
        raise WikidataUnavailable(f"Wikidata API unreachable after {self.retries + 1} attempts ({last})")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        # Exponential backoff; a server's Retry-After wins when it asks for longer, capped so a job cannot hang.
        delay = self.backoff * 2 ** (attempt - 1)
        if retry_after and retry_after.isdigit():
            delay = max(delay, float(retry_after))
        return min(delay, self.max_backoff)


def validate_qid(qid: str) -> str:
    text = (qid or "").strip().upper()
    if not QID_RE.match(text):
        raise InvalidWikidataId("a Wikidata id looks like 'Q42' (Q followed by digits)")
    return text
