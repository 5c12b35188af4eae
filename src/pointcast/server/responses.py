"""Answers and the HTTP responses made of them: what an operation returns (``Answer``: body
parts and validators, kept per run), and what each request gets from it (``cached_response``:
gzip, ``304``, ``max-age`` and a fresh ``requestId`` applied per request), or from an error."""

from __future__ import annotations

import email.utils
import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .compress import Deflated, Piece, accepts_gzip, gzip_chunks
from .errors import ApiError

JSON_TYPE = b"application/json"


@dataclass
class Response:
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


def error_response(err: ApiError) -> Response:
    body = json.dumps({"status": err.status, "code": err.code, "message": err.message}).encode()
    headers = [
        (b"content-type", JSON_TYPE),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *err.headers,
    ]
    return Response(err.status, body, headers)


@functools.lru_cache(maxsize=64)  # a run's few times, formatted once
def _http_date(dt: datetime) -> bytes:
    return email.utils.format_datetime(dt.astimezone(timezone.utc), usegmt=True).encode()


def _etag_matches(header: bytes, etag: bytes) -> bool:
    """Weak comparison, as RFC 9110 asks for If-None-Match (``etag`` may be weak itself)."""
    if header.strip() == b"*":
        return True
    if etag.startswith(b"W/"):
        etag = etag[2:]
    for candidate in header.split(b","):
        candidate = candidate.strip()
        if candidate.startswith(b"W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


def _not_modified_since(header: bytes, last_modified: datetime | None) -> bool:
    if last_modified is None:
        return False
    try:
        since = email.utils.parsedate_to_datetime(header.decode("latin-1"))
    except Exception:  # a malformed date is no condition
        return False
    if since.tzinfo is None:
        return False
    return last_modified.replace(microsecond=0) <= since


@dataclass(frozen=True)
class Answer:
    """A 200 answer as an operation makes it: its body parts and validators.

    Nothing in it depends on the request's headers or the clock (gzip, 304, max-age and the
    fresh requestId of 4.4 and 4.5 are applied per request by ``cached_response``), so an
    answer is kept per run and query (``Run.answers``) and a repeated request skips the
    operation."""

    parts: list[bytes]
    etag: bytes
    updated: datetime | None
    next_update: datetime | None
    deflated: Callable[[Piece], Deflated]  # the cached deflate form of a ``Piece``
    request_id_at: int | None = None  # the part that is a fresh UUID4 per request

    @property
    def size(self) -> int:
        """Bytes charged to the run's answers: every part, the pieces it shares with the
        cached files included, so that the bound holds whichever of the two evicts them first."""
        return sum(map(len, self.parts)) + 256


def header_value(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """A request header's value (repeated lines joined with ", "), or None."""
    values = [value for key, value in headers if key.lower() == name]
    return b", ".join(values) if values else None


def cached_response(answer: Answer, headers: list[tuple[bytes, bytes]], now: float) -> Response:
    """200 (or 304) with ETag, Last-Modified and a max-age that ends at the next update; in
    gzip when the request accepts it.

    The gzip answer is another representation, so its strong ETag differs (``"<tag>-gzip"``);
    ``Vary: Accept-Encoding`` tells caches so."""
    gzip = accepts_gzip(header_value(headers, b"accept-encoding"))
    etag = answer.etag
    if gzip:
        etag = etag[:-1] + b'-gzip"'
    max_age = 0
    if answer.next_update is not None:
        max_age = max(0, int(answer.next_update.timestamp() - now))
    response_headers = [(b"etag", etag), (b"cache-control", b"public, max-age=%d" % max_age),
                        (b"vary", b"Accept-Encoding")]
    if answer.updated is not None:
        response_headers.append((b"last-modified", _http_date(answer.updated)))
    if_none_match = header_value(headers, b"if-none-match")
    if if_none_match is not None:
        if _etag_matches(if_none_match, etag):
            return Response(304, b"", response_headers)
    else:
        if_modified_since = header_value(headers, b"if-modified-since")
        if if_modified_since is not None and _not_modified_since(if_modified_since, answer.updated):
            return Response(304, b"", response_headers)
    body_parts = answer.parts
    if answer.request_id_at is not None:
        body_parts = list(body_parts)
        body_parts[answer.request_id_at] = str(uuid.uuid4()).encode()
    if gzip:
        body_parts = gzip_chunks(body_parts, answer.deflated)
        response_headers.append((b"content-encoding", b"gzip"))
    body = b"".join(body_parts)
    response_headers += [(b"content-type", JSON_TYPE), (b"content-length", b"%d" % len(body))]
    return Response(200, body, response_headers)
