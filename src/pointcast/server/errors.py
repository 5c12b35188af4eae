"""The error answers (docs/api.md, "Errors"): ``ApiError`` and one constructor per code.

An ``ApiError`` raised anywhere below the app becomes the JSON body ``{"status", "code",
"message"}`` with ``Cache-Control: no-store`` (``responses.error_response``)."""

from __future__ import annotations

from collections.abc import Iterable

ALLOW = b"GET, HEAD"
CHALLENGE = b'ApiKey header="X-API-Key"'


class ApiError(Exception):
    """An answer of the error kind: ``{"status", "code", "message"}`` with ``no-store``."""

    def __init__(self, status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = list(headers)


def missing(name: str) -> ApiError:
    return ApiError(400, "400_001", f'"{name}" is required')


def invalid(name: str, why: str = "") -> ApiError:
    """400_002; ``why``, where the value alone does not say it: what is wrong with it."""
    return ApiError(400, "400_002", f'"{name}" is invalid value' + (f": {why}" if why else ""))


def out_of_range(name: str, text: str) -> ApiError:
    return ApiError(400, "400_003", f'"{name}" is out of range: {text}')


def outside_coverage(name: str, text: str) -> ApiError:
    return ApiError(403, "403_001", f'"{name}" is outside the coverage of this operation: {text}')


def not_found() -> ApiError:
    return ApiError(404, "404_001", "no such resource")


def no_data(message: str) -> ApiError:
    return ApiError(404, "404_002", message)


def not_allowed() -> ApiError:
    return ApiError(405, "405_001", "method not allowed", [(b"allow", ALLOW)])


def key_missing() -> ApiError:
    return ApiError(401, "401_001", '"X-API-Key" header is required', [(b"www-authenticate", CHALLENGE)])


def key_invalid() -> ApiError:
    return ApiError(401, "401_002", '"X-API-Key" is invalid', [(b"www-authenticate", CHALLENGE)])


def rate_limited(retry_after: int) -> ApiError:
    return ApiError(429, "429_001", f"rate limit exceeded: retry after {retry_after} s",
                    [(b"retry-after", str(retry_after).encode())])

