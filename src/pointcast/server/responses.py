"""Answers and the HTTP responses made of them: what an operation returns (``Answer``: body
parts and validators, kept per run), and what each request gets from it (``cached_response``:
gzip, ``304``, ``max-age`` and a fresh ``requestId`` applied per request), or from an error.

A server that offers ASGI's zero-copy send (``http.response.zerocopysend``) gets the body of an
answer asked for again as an in-memory file (``BodyFile``), which the kernel sends from its
own pages (``sendfile``) instead of copying it out of Python's memory on every request."""

from __future__ import annotations

import email.utils
import functools
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .compress import Deflated, Piece, accepts_gzip, gzip_chunks
from .errors import ApiError
from .run import ByteBoundLru

JSON_TYPE = b"application/json"
ZERO_COPY = "http.response.zerocopysend"  # the ASGI extension's name in ``scope["extensions"]``
SYNTHETIC_HEADER = (b"x-pointcast-synthetic", b"true")
"""On every answer made from synthetic model runs (the sample source): the bodies are the
specification's, so a client that reads only them could not tell (docs/api.md)."""
ZERO_COPY_BYTES = 16_384
"""Shorter bodies are joined per request: copying them costs less than a file's system calls."""


class BodyFile:
    """A body in an in-memory file (``memfd``, closed when the last reference goes): what
    ``http.response.zerocopysend`` sends from, ``size`` bytes from offset 0."""

    __slots__ = ("file", "size")

    def __init__(self, body: bytes):
        fd = os.memfd_create("pointcast-answer", os.MFD_CLOEXEC)
        self.file = open(fd, "r+b", buffering=0)  # noqa: SIM115 (lives as long as the answer)
        view = memoryview(body)
        while view:
            view = view[self.file.write(view):]
        self.size = len(body)


def body_file(body: bytes) -> BodyFile | None:
    """``body`` as a ``BodyFile``, or None where the system has no memfd or no descriptor to spare
    (the body is then sent as bytes)."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        return BodyFile(body)
    except OSError:
        return None


@dataclass
class Response:
    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    file: BodyFile | None = None  # the body, when it is sent by zero-copy (``body`` is then empty)


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
    return email.utils.format_datetime(dt.astimezone(UTC), usegmt=True).encode()


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
    fresh requestId of global/wx and ss1wx are applied per request by ``cached_response``), so an
    answer is kept per run and query (``Run.answers``) and a repeated request skips the
    operation."""

    parts: list[bytes]
    etag: bytes
    updated: datetime | None
    next_update: datetime | None
    deflated: Callable[[Piece], Deflated]  # the cached deflate form of a ``Piece``
    request_id_at: int | None = None  # the part that is a fresh UUID4 per request
    synthetic: bool = False  # made from synthetic model runs (the run's manifest): SYNTHETIC_HEADER says so
    # gzip or not -> (max-age, the 200's headers) of the second they were made in
    heads: dict[bool, tuple[int, list[tuple[bytes, bytes]]]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def size(self) -> int:
        """Bytes charged to the run's answers: every part, the pieces it shares with the
        cached files included, so that the bound holds whichever of the two evicts them first."""
        return sum(map(len, self.parts)) + 256


def header_values(headers: list[tuple[bytes, bytes]], names: frozenset[bytes]) -> dict[bytes, bytes]:
    """The request headers of ``names`` (lowercase) found, in one pass; repeated lines joined
    with ", "."""
    found: dict[bytes, bytes] = {}
    for name, value in headers:
        name = name.lower()
        if name in names:
            found[name] = found[name] + b", " + value if name in found else value
    return found


def header_value(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """A request header's value (repeated lines joined with ", "), or None."""
    return header_values(headers, frozenset((name,))).get(name)


CONDITION_HEADERS = frozenset({b"accept-encoding", b"if-none-match", b"if-modified-since"})


def _validators(answer: Answer, etag: bytes, max_age: int) -> list[tuple[bytes, bytes]]:
    headers = [(b"etag", etag), (b"cache-control", b"public, max-age=%d" % max_age),
               (b"vary", b"Accept-Encoding")]
    if answer.updated is not None:
        headers.append((b"last-modified", _http_date(answer.updated)))
    if answer.synthetic:  # on a 304 too: a cache updates its stored headers from it
        headers.append(SYNTHETIC_HEADER)
    return headers


def cached_response(answer: Answer, headers: list[tuple[bytes, bytes]], now: float,
                    files: ByteBoundLru | None = None, key: tuple[str | bytes, ...] = ()) -> Response:
    """200 (or 304) with ETag, Last-Modified and a max-age that ends at the next update; in
    gzip when the request accepts it. With ``files`` (the run's kept body files, for a server
    offering zero-copy send), a body of ``ZERO_COPY_BYTES`` or more is answered as the file kept
    under ``key``, made on first use.

    The gzip answer is another representation, so its strong ETag differs (``"<tag>-gzip"``);
    ``Vary: Accept-Encoding`` tells caches so. The 200's headers change once a second (max-age)
    and are kept in the answer meanwhile (``Answer.heads``)."""
    asked = header_values(headers, CONDITION_HEADERS)
    gzip = accepts_gzip(asked.get(b"accept-encoding"))
    etag = answer.etag
    if gzip:
        etag = etag[:-1] + b'-gzip"'
    max_age = 0
    if answer.next_update is not None:
        max_age = max(0, int(answer.next_update.timestamp() - now))
    if_none_match = asked.get(b"if-none-match")
    if if_none_match is not None:
        if _etag_matches(if_none_match, etag):
            return Response(304, b"", _validators(answer, etag, max_age))
    else:
        if_modified_since = asked.get(b"if-modified-since")
        if if_modified_since is not None and _not_modified_since(if_modified_since, answer.updated):
            return Response(304, b"", _validators(answer, etag, max_age))
    body = b""
    file = None
    if files is not None and answer.request_id_at is None:
        key = (*key, b"gzip" if gzip else b"")
        file = files.get(key)
        if file is None:
            body = _body(answer, gzip)
            if len(body) >= ZERO_COPY_BYTES and (file := body_file(body)) is not None:
                files.put(key, file, file.size)
                body = b""
    else:
        body = _body(answer, gzip)
    head = answer.heads.get(gzip)
    if head is None or head[0] != max_age:
        response_headers = _validators(answer, etag, max_age)
        if gzip:
            response_headers.append((b"content-encoding", b"gzip"))
        length = file.size if file is not None else len(body)  # the same for every request
        response_headers += [(b"content-type", JSON_TYPE), (b"content-length", b"%d" % length)]
        head = answer.heads[gzip] = (max_age, response_headers)
    return Response(200, body, head[1], file)


def _body(answer: Answer, gzip: bool) -> bytes:
    body_parts = answer.parts
    if answer.request_id_at is not None:
        body_parts = list(body_parts)
        body_parts[answer.request_id_at] = str(uuid.uuid4()).encode()
    if gzip:
        body_parts = gzip_chunks(body_parts, answer.deflated)
    return b"".join(body_parts)
