"""Wikidata as a source of subjects and facts: the ``wbgetentities`` API client and the JSON dump reader."""

from app.wikidata.client import (
    EntityNotFound,
    InvalidWikidataId,
    NotHuman,
    WikidataClient,
    WikidataError,
    WikidataSubject,
    WikidataUnavailable,
)

__all__ = [
    "EntityNotFound",
    "InvalidWikidataId",
    "NotHuman",
    "WikidataClient",
    "WikidataError",
    "WikidataSubject",
    "WikidataUnavailable",
]
