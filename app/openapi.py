"""The OpenAPI document, made to tell the truth: one error shape for every 4xx/5xx, the limits the running
settings apply, `model` as the models this server takes, and links that chain a created resource to its reads.

Statuses every route may answer are added where routers are included (``ERROR_RESPONSES``); what depends on the
settings is filled in when the document is first built (``install``), so that a server's /openapi.json describes
that server. The checked-in openapi/openapi.json is built with the default settings.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from app.settings import Settings, get_settings
from app.validation import INT64_MAX, INT64_MIN, LIMIT_KEY


class ErrorItem(BaseModel):
    field: str | None = Field(description="The request field at fault (e.g. subject.facts[0].value), or null")
    message: str = Field(description="What is wrong and how to fix it; never repeats the value sent")


class ErrorBody(BaseModel):
    detail: list[ErrorItem]


def _error(description: str, **headers: str) -> dict[str, Any]:
    response: dict[str, Any] = {"model": ErrorBody, "description": description}
    if headers:
        response["headers"] = {
            name: {"description": text, "schema": {"type": "string"}} for name, text in headers.items()
        }
    return response


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error("The request cannot be read (e.g. a body that is not what the content type says)"),
    401: _error("No, a malformed, an unknown or a revoked key or token", **{"WWW-Authenticate": "Bearer"}),
    403: _error("The key's role may not do this"),
    404: _error("No such resource among those this key may see, or no such path"),
    405: _error("Method not allowed on this path", Allow="The methods the path takes"),
    409: _error("Conflicts with the resource's state or with an earlier request (Idempotency-Key)"),
    408: _error("The body did not arrive within MEMAUDIT_BODY_TIMEOUT_SECONDS; send it at once"),
    413: _error(
        "The body is larger than the server's limit (MEMAUDIT_MAX_REQUEST_BYTES), or than its audit kind needs"
    ),
    422: _error("A field is invalid: `field` names it, `message` says how to fix it"),
    429: _error("A rate limit or quota of this key is reached", **{"Retry-After": "Seconds to wait"}),
    500: _error("An internal error; the answer names no value and the server's log holds the details"),
    503: _error("A service the request needs is unavailable (database, Redis, Wikidata); retry later"),
}

# Links from an operation's answer to the reads of what it created: operationId -> {link: (target, parameters)}.
# Not the kind-specific reads of an audit (facts, records, capacity, strings…): they answer 404 for another kind.
LINKS: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    "create_audit_audits_post": {
        "GetAudit": ("get_audit_audits__audit_id__get", {"audit_id": "$response.body#/id"}),
        "CancelAudit": ("cancel_audit_audits__audit_id__delete", {"audit_id": "$response.body#/id"}),
        "EraseSubject": ("erase_subject_subjects__subject_id__delete", {"subject_id": "$response.body#/subject_id"}),
    },
    "upload_dataset_datasets_post": {
        "GetDataset": ("get_dataset_datasets__dataset_id__get", {"dataset_id": "$response.body#/id"}),
        "DeleteDataset": ("delete_dataset_datasets__dataset_id__delete", {"dataset_id": "$response.body#/id"}),
        "DatasetCoverage": ("compare_models_datasets__dataset_id__coverage_get", {"dataset_id": "$response.body#/id"}),
    },
}
# Request bodies that work on a server with the default settings (docs/api.md's examples), one per kind.
EXAMPLES: dict[str, dict[str, Any]] = {
    "create_audit_audits_post": {
        "subject": {
            "kind": "subject",
            "model": "groundtruth-tiny",
            "subject": {
                "name": "Ada Lovelace",
                "facts": [
                    {"property": "P106", "value": "mathematician"},
                    {"property": "P27", "value": "United Kingdom"},
                ],
            },
        },
        "capacity": {
            "kind": "capacity",
            "model": "scratch",
            "grid": {
                "architectures": [{"n_layer": 1, "d_model": 8, "n_head": 2}],
                "vocab_size": 16,
                "seq_len": 8,
                "dataset_sizes": [8, 64],
            },
        },
        "dynamics": {
            "kind": "dynamics",
            "model": "groundtruth-tiny",
            "strings": [{"text": f"customer {i} ordered item {i % 5}"} for i in range(8)],
        },
    },
}


def install(app: FastAPI, model_fields: dict[str, tuple[str, ...]], kind_names: tuple[str, ...] = ()) -> None:
    """Build the document once, then fill in what the settings decide. ``model_fields`` maps a request schema's
    name to the model names it takes besides registered ones (e.g. capacity's "scratch")."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            settings = get_settings()
            _apply_limits(document, settings)
            _integer_bounds(document)
            _model_names(document, settings, model_fields)
            _kind_names(document, kind_names)
            _links(document)
            _examples(document)
            document["components"]["schemas"].pop("HTTPValidationError", None)
            document["components"]["schemas"].pop("ValidationError", None)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _apply_limits(node: Any, settings: Settings) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for keyword, setting in (item.pop(LIMIT_KEY, None) or {}).items():
                item[keyword] = getattr(settings, setting)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _integer_bounds(node: Any) -> None:
    """Every integer the API takes or gives is a 64-bit one (app.validation refuses larger ones): say so."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "integer":
                item.setdefault("minimum", INT64_MIN)
                item.setdefault("maximum", INT64_MAX)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def model_schema(settings: Settings, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Registered models (plus a kind's own), and `hf:` paths where this server takes them."""
    choices: list[dict[str, Any]] = [{"type": "string", "enum": sorted({*settings.models, *extra})}]
    roots = settings.hf_roots()
    if roots is None:
        choices.append({"type": "string", "pattern": "^hf:.+", "maxLength": 300})
    elif roots:
        under = "|".join(re.escape(str(root).rstrip("/")) for root in roots)
        choices.append({"type": "string", "pattern": f"^hf:({under})/[^\\x00]*$", "maxLength": 300})
    description = "A registered model (GET /models)" + (" or hf:<path>" if roots != [] else "")
    schema = {"anyOf": choices} if len(choices) > 1 else choices[0]
    return {**schema, "description": description}


def _model_names(document: dict[str, Any], settings: Settings, fields: dict[str, tuple[str, ...]]) -> None:
    schemas = document["components"]["schemas"]
    for name, extra in fields.items():
        properties = schemas.get(name, {}).get("properties", {})
        if "model" in properties:
            properties["model"] = {**model_schema(settings, extra), "title": "Model"}
    text = schemas.get("TextInput", {}).get("properties", {})
    if "reference" in text:  # capacity's text mode: the reference is a model too
        text["reference"] = {**model_schema(settings), "title": "Reference"}


def _kind_names(document: dict[str, Any], kinds: tuple[str, ...]) -> None:
    """A `kind` query parameter takes the kinds this service was built with (the registry, not a constant)."""
    if not kinds:
        return
    for path in document["paths"].values():
        for operation in path.values():
            for param in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if param.get("name") == "kind" and param.get("in") == "query":
                    param["schema"] = {
                        "anyOf": [{"type": "string", "enum": list(kinds)}, {"type": "null"}],
                        "title": "Kind",
                        "description": "an audit kind (the `kind` of POST /audits)",
                    }


def _links(document: dict[str, Any]) -> None:
    operations = {op.get("operationId"): op for path in document["paths"].values() for op in path.values()}
    for source, links in LINKS.items():
        operation = operations.get(source)
        if operation is None:
            continue
        success = next(code for code in operation["responses"] if code.startswith("2"))
        operation["responses"][success]["links"] = {
            name: {"operationId": target, "parameters": params}
            for name, (target, params) in links.items()
            if target in operations
        }


def _examples(document: dict[str, Any]) -> None:
    operations = {op.get("operationId"): op for path in document["paths"].values() for op in path.values()}
    for source, examples in EXAMPLES.items():
        body = operations.get(source, {}).get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            body["examples"] = {name: {"value": value} for name, value in examples.items()}
