"""Domain errors that routers map to HTTP answers. Messages name the field and the fix, never personal data."""

from __future__ import annotations

import math


class DomainError(Exception):
    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(DomainError):
    status_code = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409


class Unauthorized(DomainError):
    status_code = 401


class Forbidden(DomainError):
    status_code = 403


class ServiceUnavailable(DomainError):
    status_code = 503


class PayloadTooLarge(DomainError):
    status_code = 413


class TooManyRequests(DomainError):
    """A rate limit or quota is reached; ``retry_after`` (seconds) becomes the Retry-After header."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: float, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = max(1, math.ceil(retry_after))


def error_body(message: str, field: str | None = None) -> dict[str, list[dict[str, str | None]]]:
    """The one error shape of every 4xx/5xx answer: ``{"detail": [{"field": ..., "message": ...}]}``."""
    return {"detail": [{"field": field, "message": message}]}
