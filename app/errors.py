"""Domain errors that routers map to HTTP answers. Messages name the field and the fix, never personal data."""

from __future__ import annotations


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
