"""The API's error answers: one JSON shape, `{"error": CODE, "detail": SENTENCE}`, for every refusal.

`error` is a short code a client can branch on; `detail` says what was wrong and how to fix it.
The library's exceptions (`memory.errors`) map to client errors here, never to a 500: a missing
fact is a 404, a refused write a 409 or a 422.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from memory.errors import (
    BeadsMemoryError,
    CycleError,
    FactNotFoundError,
    InvalidCursorError,
    NamespaceNotFoundError,
    SupersedeRefusedError,
    UntrustedWriteError,
)

API_PREFIX = "/api"


def is_api_path(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


# the code a client sees for each status the API answers with
CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_attempts",
    500: "internal_error",
    503: "database_unavailable",
}


class ApiError(Exception):
    """A refusal with its status, code and sentence; raised by routes and dependencies."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        error: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.error = error or CODES.get(status, "error")
        self.headers = headers
        self.extra = extra or {}


def error_response(
    status: int,
    detail: str,
    *,
    error: str | None = None,
    headers: Mapping[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"error": error or CODES.get(status, "error"), "detail": detail, **(extra or {})}
    return JSONResponse(body, status_code=status, headers=headers)


def api_error_response(exc: ApiError) -> JSONResponse:
    return error_response(exc.status, exc.detail, error=exc.error, headers=exc.headers, extra=exc.extra)


def library_error(exc: BeadsMemoryError) -> ApiError:
    """What a library exception means to a client."""
    if isinstance(exc, FactNotFoundError | NamespaceNotFoundError):
        return ApiError(404, str(exc), error="not_found")
    if isinstance(exc, InvalidCursorError):
        # a well-formed value naming no page: as a fact id naming no fact (the schema cannot say more)
        return ApiError(404, str(exc), error="not_found")
    if isinstance(exc, CycleError):
        return ApiError(409, str(exc), error="cycle")
    if isinstance(exc, SupersedeRefusedError):
        return ApiError(422, str(exc), error="supersede_refused")
    if isinstance(exc, UntrustedWriteError):
        return ApiError(422, str(exc), error="untrusted_write")
    # an archived fact, and whatever else the library refuses: the request cannot be done as asked
    return ApiError(409, str(exc), error="refused")
