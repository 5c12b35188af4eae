"""The thin server: hands out the precomputed JSON of the current published run.

A plain ASGI callable (no framework) run under uvicorn with uvloop and httptools. Every
request resolves ``<root>/current`` exactly once (``os.readlink``) and reads everything it
needs from that one run directory, so a response never mixes two runs, even while a new
run is being published. What a run holds is cached in memory per run id: each product's
``index.json`` (with a ``cell -> point id`` map) and the bytes of the point files,
loaded on first use and LRU-bounded. So are its answers, by path and query text: a query
text seen before in the run skips parsing, coverage, cell look-up and splicing, and only the
request's own headers (gzip, conditions, max-age) and a fresh requestId are applied to the
kept answer. When ``current`` moves on, the old run's caches are dropped.

No file path is ever built from request text: the product and the variant (freq) come
from fixed tables in this module, the point id from the run's ``index.json``. The same holds for
the viewer (``GET /``, docs/viewer.md) and the run-tree files its page reads (``tree_file``).

The point files start with ``{"latitude": <lat>, "longitude": <lon>, "basetime"`` (see
docs/contracts.md); a response splices the requested coordinates in front of
``"basetime"`` without parsing JSON per request. The global (4.4) and Japan (4.5) files are spliced the same way:
they start with ``{"lat": <lat>, "lon": <lon>, "srf"`` and become the one ``wxdata`` element of
an answer whose ``requestId`` is a fresh UUID4 per request (so its ETag is weak: it covers the
forecast content, not the id). Windpack (4.3) height files are spliced the
same way, with the ``hub_height`` value replaced by the requested text (its byte offsets are
found once per file); a height between two precomputed ones is interpolated from the numeric
u/v arrays of the two files, parsed once per run and cached.

A request that accepts gzip (``Accept-Encoding``) gets the same bytes gzip-compressed, with
``Content-Encoding: gzip``, without compressing the answer per request: the constant parts of
answers (a point file after its coordinates, a catalog) are ``Piece``s, deflated once per run at
first use and cached beside them; a gzip answer is a gzip header, the variable bytes as stored
deflate blocks, the pieces' cached deflate blocks, and the CRC-32 combined from the parts'.

``pointcast serve`` answers in uvicorn's protocol callback (``HttpTools``): an answer is built
synchronously from memory, so the ASGI task, event and send messages per request are skipped;
the ASGI callable stays for any other server and gives the same answers.

Operations live in ``OPERATIONS`` (path -> ``Operation``).
The query conventions and error codes are documented in docs/api.md.
"""

from __future__ import annotations

import email.utils
import functools
import gzip
import hashlib
import json
import logging
import math
import os
import re
import struct
import time
import urllib.parse
import uuid
import zlib
from array import array
from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path, PurePath
from typing import Any, Protocol

import httptools
import numpy as np
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from . import openapi, viewer
from .config import ApiKeyConfig, api_key_sha256
from .contract import (FREQS, HUB_HEIGHT_RANGE_M, HUB_HEIGHT_SYNTAX, MAX_NUMBER_CHARS, NUMBER_SYNTAX,
                       PAIR_SEPARATORS, WIND_DATA, height_name)
from .contract import max_pairs as max_pairs_for

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HUB_HEIGHT_RANGE = tuple(map(Decimal, HUB_HEIGHT_RANGE_M))  # metres, both bounds included, exact
WIND_UNIT = WIND_DATA.units
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024  # bytes of point files (and what is made of them) kept per run
DEFAULT_ANSWER_BYTES = 64 * 1024 * 1024  # bytes of answers kept per run (``Answer.size``)

ALLOW = b"GET, HEAD"
JSON_TYPE = b"application/json"
API_KEY_HEADER = b"x-api-key"  # ASGI header names are lower case; compared lower-cased anyway
MAX_API_KEY_BYTES = 256  # a longer X-API-Key is no key of ours (and is not hashed)
CHALLENGE = b'ApiKey header="X-API-Key"'

# A point id is used as a file name: only plain names are accepted from index.json.
_POINT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_PRODUCT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
_NUMBER = re.compile(NUMBER_SYNTAX + r"\Z")  # the grammar is the contract's
_PAIR_SEPARATORS = re.compile(PAIR_SEPARATORS)
_HUB_HEIGHT = re.compile(HUB_HEIGHT_SYNTAX + r"\Z")
_HEX = frozenset(b"0123456789abcdefABCDEF")


# --------------------------------------------------------------------------- errors


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


def invalid(name: str) -> ApiError:
    return ApiError(400, "400_002", f'"{name}" is invalid value')


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


# --------------------------------------------------------------------------- access control


class TokenBucket:
    """``burst`` requests at once, refilled at ``rate`` requests per second."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float, burst: int, now: float):
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp = float(burst), now

    def take(self, now: float) -> float:
        """Take one token: 0.0 when granted, else the seconds until one is there."""
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Access:
    """Who may ask: the configured API keys, known by their SHA-256 only, and each key's
    token bucket. Without keys the service is open (and not rate limited).

    The key itself is never stored, logged or echoed; logs name the key's configured name."""

    def __init__(self, keys: Iterable[ApiKeyConfig] = (), clock: Callable[[], float] = time.monotonic):
        self.keys = {key.sha256: key for key in keys}
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    @property
    def open(self) -> bool:
        return not self.keys

    def admit(self, headers: Iterable[tuple[bytes, bytes]]) -> ApiKeyConfig | None:
        """The key a request presents (header ``X-API-Key``, any case): 401_001 without one,
        401_002 for an unknown one (or several), 429_001 when its bucket is empty."""
        if self.open:
            return None
        values = [value for name, value in headers if name.lower() == API_KEY_HEADER]
        if not values or values == [b""]:
            raise key_missing()
        if len(values) > 1 or len(values[0]) > MAX_API_KEY_BYTES:
            raise key_invalid()
        key = self.keys.get(api_key_sha256(values[0].strip()))
        if key is None:
            log.info("refused a request with an unknown API key")
            raise key_invalid()
        if key.rate_limit is not None and key.burst is not None:
            now = self.clock()
            bucket = self._buckets.get(key.name)
            if bucket is None:
                bucket = self._buckets[key.name] = TokenBucket(key.rate_limit, key.burst, now)
            wait = bucket.take(now)
            if wait > 0.0:
                log.info("API key %s is rate limited for %.2f s", key.name, wait)
                raise rate_limited(max(1, math.ceil(wait)))
        return key


# --------------------------------------------------------------------------- query parsing


def _percent_decode(raw: bytes) -> str:
    """Decode one ``application/x-www-form-urlencoded`` component, strictly.

    ``+`` is a space; ``%`` must be followed by two hex digits; the result must be valid
    UTF-8 without NUL. Raises ``ValueError`` otherwise.
    """
    if b"+" in raw:
        raw = raw.replace(b"+", b" ")
    if b"%" in raw:
        pieces = raw.split(b"%")
        out = bytearray(pieces[0])
        for piece in pieces[1:]:
            if len(piece) < 2 or piece[0] not in _HEX or piece[1] not in _HEX:
                raise ValueError("invalid percent-encoding")
            out.append(int(piece[:2], 16))
            out += piece[2:]
        raw = bytes(out)
    if b"\x00" in raw:
        raise ValueError("NUL byte")
    return raw.decode("utf-8")  # strict: UnicodeDecodeError is a ValueError


def parse_query(query_string: bytes, known: Iterable[str] = ()) -> dict[str, list[str]]:
    """Split a raw query string into ``name -> [values]`` (in order of appearance).

    The whole query string must decode (see ``_percent_decode``), else 400_002; the message
    names the parameter when it is one of ``known``. Empty ``&&`` segments are skipped; a
    name without ``=`` has the empty value.
    """
    params: dict[str, list[str]] = {}
    if b"%" not in query_string and b"+" not in query_string and b"\x00" not in query_string:  # decode it whole
        try:
            text = query_string.decode("utf-8")
        except UnicodeDecodeError:
            pass  # the loop below names the parameter
        else:
            for segment in text.split("&"):
                if segment:
                    name, _, value = segment.partition("=")
                    params.setdefault(name, []).append(value)
            return params
    known = frozenset(known)
    for segment in query_string.split(b"&"):
        if not segment:
            continue
        raw_name, _, raw_value = segment.partition(b"=")
        try:
            name = _percent_decode(raw_name)
        except ValueError:
            raise invalid("query") from None
        try:
            value = _percent_decode(raw_value)
        except ValueError:
            raise invalid(name if name in known else "query") from None
        params.setdefault(name, []).append(value)
    return params


def single(params: Mapping[str, list[str]], name: str) -> str:
    """The one value of a required parameter: 400_001 when absent or empty, 400_002 when
    repeated with different values."""
    values = params.get(name)
    if not values or all(v == "" for v in values):
        raise missing(name)
    if any(v != values[0] for v in values[1:]):
        raise invalid(name)
    return values[0]


@dataclass(frozen=True)
class Pair:
    """One requested point: its text exactly as sent (decoded) and its coordinates."""

    text: str
    lat: float
    lon: float

    @property
    def lat_json(self) -> bytes:
        return repr(self.lat).encode()

    @property
    def lon_json(self) -> bytes:
        return repr(self.lon).encode()


def _number(text: str) -> float | None:
    if len(text) > MAX_NUMBER_CHARS or not _NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_pairs(value: str, max_pairs: int, name: str = "latlon", *, check_range: bool = True) -> list[Pair]:
    """``lat,lon`` pairs separated by ``;`` or ``|``.

    400_002: too many pairs, an empty pair, not exactly two numbers, NaN/inf.
    400_003: latitude outside [-90, 90] or longitude outside [-180, 180] (unless
    ``check_range`` is false: then the caller runs ``check_pair_ranges`` later).
    """
    texts = _PAIR_SEPARATORS.split(value)
    if len(texts) > max_pairs:
        raise invalid(name)
    pairs = []
    for text in texts:
        parts = text.split(",")
        if len(parts) != 2:
            raise invalid(name)
        lat, lon = _number(parts[0]), _number(parts[1])
        if lat is None or lon is None:
            raise invalid(name)
        pairs.append(Pair(text, lat, lon))
    if check_range:
        check_pair_ranges(pairs, name)
    return pairs


def check_pair_ranges(pairs: Iterable[Pair], name: str = "latlon") -> None:
    for pair in pairs:
        if not (-90.0 <= pair.lat <= 90.0 and -180.0 <= pair.lon <= 180.0):
            raise out_of_range(name, pair.text)


def check_coverage(grid: Grid, pairs: Iterable[Pair], name: str = "latlon") -> None:
    for pair in pairs:
        if not grid.covers(pair.lat, pair.lon):
            raise outside_coverage(name, pair.text)


def parse_coordinate(text: str, name: str) -> float:
    """One decimal degree (4.5's ``lat`` / ``lon``), in the syntax of a ``latlon`` number:
    400_002 when it is not one (or NaN/inf). The range is a separate, later check."""
    value = _number(text)
    if value is None:
        raise invalid(name)
    return value


@dataclass(frozen=True)
class HubHeight:
    """The requested height: its text exactly as sent, its exact and its float value."""

    text: str
    exact: Decimal
    metres: float


def parse_hubheight(text: str, name: str = "hubheight") -> HubHeight:
    """``<digits>[.<digits>]m``, e.g. ``100m``, ``112.5m``; anything else is 400_002.

    The range (``check_hubheight_range``) is a separate, later check."""
    match = _HUB_HEIGHT.match(text) if len(text) <= MAX_NUMBER_CHARS else None
    if match is None:
        raise invalid(name)
    exact = Decimal(match.group(1))
    return HubHeight(text, exact, float(exact))


def check_hubheight_range(height: HubHeight, name: str = "hubheight") -> None:
    low, high = HUB_HEIGHT_RANGE
    if not (low <= height.exact <= high):  # exact: 300.0000000000000001m is out of range
        raise out_of_range(name, height.text)


# --------------------------------------------------------------------------- gzip


class Piece(bytes):
    """Constant bytes of a run's answers (a point file after its coordinates, a catalog).
    ``key`` names its deflate form in the run's cache (``Run.deflated``)."""

    key: tuple[str, ...]

    def __new__(cls, data: bytes, key: tuple[str, ...]) -> Piece:
        piece = super().__new__(cls, data)
        piece.key = key
        return piece


GZIP_LEVEL = 6  # a piece is deflated once per run: the usual best ratio for its time
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, OS unknown
_CRC32_POLY = 0xEDB88320  # CRC-32 of gzip, reflected; polynomials below are zlib's bit order


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the CRC-32 polynomial (zlib's ``multmodp``; ``a`` is never 0 here)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _CRC32_POLY if b & 1 else b >> 1


def _x2n_table() -> list[int]:
    table = [1 << 30]  # x^1
    for _ in range(31):
        table.append(_multmodp(table[-1], table[-1]))
    return table  # table[k] = x^(2^k)


_X2N = _x2n_table()


def _x8nmodp(n: int) -> int:
    """x^(8n) modulo the polynomial: what appending n bytes does to a CRC (zlib's ``x2nmodp(n, 3)``)."""
    p, k = 1 << 31, 3  # p = x^0
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


class Deflated:
    """A piece deflated once: raw deflate blocks ending in a sync flush (byte-aligned, not final,
    so anything may follow), its CRC-32, and nibble tables of ``crc -> crc * x^(8 len)``, which
    is zlib's ``crc32_combine``: crc32(a + piece) = shift(crc32(a)) ^ crc32(piece)."""

    __slots__ = ("raw", "crc", "length", "_shift")

    def __init__(self, data: bytes):
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        self.raw = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
        self.crc = zlib.crc32(data)
        self.length = len(data)
        op = _x8nmodp(len(data))
        basis = [_multmodp(op, 1 << bit) for bit in range(32)]  # the shift is linear: one image per bit
        table = array("I", bytes(4 * 128))
        for nibble in range(8):
            for value in range(1, 16):
                low = value & -value  # the lowest bit of value
                bit = 4 * nibble + low.bit_length() - 1
                table[16 * nibble + value] = table[16 * nibble + (value ^ low)] ^ basis[bit]
        self._shift = table

    def after(self, crc: int) -> int:
        """The CRC-32 of some bytes followed by this piece, from the CRC-32 of those bytes."""
        t = self._shift
        return (t[crc & 15] ^ t[16 | crc >> 4 & 15] ^ t[32 | crc >> 8 & 15] ^ t[48 | crc >> 12 & 15]
                ^ t[64 | crc >> 16 & 15] ^ t[80 | crc >> 20 & 15] ^ t[96 | crc >> 24 & 15] ^ t[112 | crc >> 28]
                ^ self.crc)

    @property
    def size(self) -> int:
        return len(self.raw) + 4 * 128 + 64


def _stored(data: bytes, final: bool) -> list[bytes]:
    """``data`` as stored (uncompressed) deflate blocks, the last one final if asked."""
    blocks = []
    for start in range(0, max(len(data), 1), 0xFFFF):
        chunk = data[start:start + 0xFFFF]
        last = final and start + 0xFFFF >= len(data)
        blocks += [struct.pack("<BHH", last, len(chunk), len(chunk) ^ 0xFFFF), chunk]
    return blocks


def gzip_chunks(parts: Iterable[bytes], deflated: Callable[[Piece], Deflated]) -> list[bytes]:
    """One gzip member (RFC 1952) whose content is ``b"".join(parts)``: variable bytes go in
    stored blocks, each ``Piece`` as its cached deflate blocks; no byte is compressed here."""
    out = [GZIP_HEADER]
    crc = size = 0
    pending: list[bytes] = []
    for part in parts:
        if type(part) is not Piece:
            pending.append(part)
            continue
        if pending:
            literal = b"".join(pending)
            pending = []
            out += _stored(literal, final=False)
            crc = zlib.crc32(literal, crc)
            size += len(literal)
        piece = deflated(part)
        out.append(piece.raw)
        crc = piece.after(crc)
        size += piece.length
    literal = b"".join(pending)
    out += _stored(literal, final=True)
    out.append(struct.pack("<II", zlib.crc32(literal, crc), (size + len(literal)) & 0xFFFFFFFF))
    return out


_QVALUE = re.compile(rb"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)\Z")


@functools.lru_cache(maxsize=256)
def accepts_gzip(accept_encoding: bytes | None) -> bool:
    """Whether to answer in gzip (RFC 9110 12.5.3): gzip (or x-gzip, or ``*``) with a q above 0,
    unless identity (or ``*`` for it) is listed with a higher q. No header, an empty one, or one
    that makes nothing acceptable: identity. A member with a malformed q is ignored."""
    if not accept_encoding:
        return False
    weights: dict[bytes, float] = {}
    for member in accept_encoding.split(b","):
        coding, *params = member.split(b";")
        coding = coding.strip().lower()
        weight = 1.0
        for param in params:
            name, _, value = param.partition(b"=")
            if name.strip().lower() == b"q":
                value = value.strip()
                weight = float(value) if _QVALUE.match(value) else -1.0
        if coding and weight >= 0.0:
            weights.setdefault(b"gzip" if coding == b"x-gzip" else coding, weight)
    anything = weights.get(b"*")
    gzip_q = weights.get(b"gzip", anything or 0.0)
    identity_q = weights.get(b"identity", anything or 0.0)
    return gzip_q > 0.0 and gzip_q >= identity_q


# --------------------------------------------------------------------------- the run tree


class Grid(Protocol):
    def cell_key(self, lat: float, lon: float) -> str: ...

    def covers(self, lat: float, lon: float) -> bool: ...


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


@dataclass
class ProductIndex:
    """A product's ``index.json`` as the server needs it."""

    product: str
    meta: dict[str, Any]
    cells: dict[str, str]  # grid cell -> point id
    updated: datetime | None
    next_update: datetime | None
    heights: dict[str, tuple[float, ...]] = field(default_factory=dict)  # point id -> sorted heights (eu-wind)
    time_zones: dict[str, str] = field(default_factory=dict)  # point id -> its own IANA zone (global)

    @functools.cached_property
    def point_ids(self) -> frozenset[str]:
        return frozenset(self.cells.values())

    @classmethod
    def load(cls, product: str, path: Path) -> ProductIndex | None:
        try:
            meta = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("unreadable index %s: %s", path, exc)
            return None
        if not isinstance(meta, dict) or not isinstance(meta.get("points"), list):
            log.error("index %s has no points list", path)
            return None
        cells: dict[str, str] = {}
        heights: dict[str, tuple[float, ...]] = {}
        time_zones: dict[str, str] = {}
        for point in meta["points"]:
            pid = point.get("id") if isinstance(point, dict) else None
            cell = point.get("cell") if isinstance(point, dict) else None
            if not isinstance(pid, str) or not _POINT_ID.match(pid) or not isinstance(cell, str):
                log.error("index %s: skipping point %r (id must be a plain file name, cell a string)", path, point)
                continue
            if cell in cells:
                log.warning("index %s: points %s and %s share cell %s; serving %s", path, cells[cell], pid, cell, cells[cell])
                continue
            cells[cell] = pid
            if isinstance(point.get("time_zone"), str):
                time_zones[pid] = point["time_zone"]
            if "heights" in point:
                point_heights = _heights(point["heights"])
                if point_heights is None:
                    log.error("index %s: point %s has invalid heights %r", path, pid, point["heights"])
                else:
                    heights[pid] = point_heights
        return cls(
            product, meta, cells, _parse_time(meta.get("updated_time")), _parse_time(meta.get("next_update")), heights,
            time_zones,
        )


def _heights(value: Any) -> tuple[float, ...] | None:
    """A point's precomputed heights (metres) from index.json: finite, positive, sorted."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in value):
        return None
    heights = sorted({float(h) for h in value})
    if not all(math.isfinite(h) and 0.0 < h < 1e5 for h in heights):
        return None
    return tuple(heights)


@dataclass(frozen=True)
class SpliceLayout:
    """How a kind of point file starts: its two coordinate keys, then the key that follows."""

    lat: str
    lon: str
    anchor: str

    @property
    def open(self) -> bytes:  # b'{"latitude":'
        return b'{"' + self.lat.encode() + b'":'

    @property
    def between(self) -> bytes:  # b',"longitude":'
        return b',"' + self.lon.encode() + b'":'


EU_LAYOUT = SpliceLayout("latitude", "longitude", "basetime")  # 4.1-4.3 (docs/contracts.md)
WX_LAYOUT = SpliceLayout("lat", "lon", "srf")  # 4.4 and 4.5: one wxdata element


@dataclass(frozen=True)
class PointFile:
    """A point file ready to splice: everything after the longitude, and a digest."""

    tail: Piece  # b',"basetime": ... }'
    digest: bytes
    layout: SpliceLayout = EU_LAYOUT

    def splice(self, lat_json: bytes, lon_json: bytes) -> list[bytes]:
        return [self.layout.open, lat_json, self.layout.between, lon_json, self.tail]

    @classmethod
    def from_bytes(cls, data: bytes, layout: SpliceLayout = EU_LAYOUT, key: tuple[str, ...] = ()) -> PointFile:
        """``key``: the file's key in the run's cache (it names the tail's deflate form)."""
        digest = hashlib.blake2b(data, digest_size=16).digest()
        offset = data.find(b'"' + layout.anchor.encode() + b'"')
        head = data[:offset].strip() if offset > 0 else b""
        if (
            offset > 0
            and head.startswith(b"{")
            and head.endswith(b",")
            and b'"' + layout.lat.encode() + b'"' in head
            and b'"' + layout.lon.encode() + b'"' in head
            and len(head) < 256
        ):
            return cls(Piece(b"," + data[offset:].rstrip(), key), digest, layout)
        # Not in the contract's shape: re-render once (cached), never per request.
        log.warning("point file not in the documented layout; re-rendering it once")
        obj = json.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("a point file must hold a JSON object")
        obj.pop(layout.lat, None)
        obj.pop(layout.lon, None)
        rest = json.dumps(obj).encode()[1:]  # drop the "{"
        return cls(Piece((b"," + rest) if obj else b"}", key), digest, layout)


def _hub_height_value(tail: bytes) -> tuple[int, int] | None:
    """Where the string value of ``"hub_height"`` is in a point file's tail: (start, end) of
    the value including its quotes, or None. Only the object's header is searched."""
    key = tail.find(b'"hub_height"', 0, 1024)
    if key < 0:
        return None
    i = key + len(b'"hub_height"')
    while i < len(tail) and tail[i] in b" \t\r\n":
        i += 1
    if i >= len(tail) or tail[i] != ord(":"):
        return None
    i += 1
    while i < len(tail) and tail[i] in b" \t\r\n":
        i += 1
    if i >= len(tail) or tail[i] != ord('"'):
        return None
    end = tail.find(b'"', i + 1, i + 64)
    if end < 0 or b"\\" in tail[i:end]:
        return None
    return i, end + 1


@dataclass(frozen=True)
class WindFile:
    """A windpack height file ready to splice: the tail around the ``hub_height`` value."""

    head: Piece  # b',"basetime": ... "hub_height":'
    value: bytes  # the stored value, b'"100m"'
    rest: Piece  # b',"unit": ... }'
    digest: bytes

    @classmethod
    def from_bytes(cls, data: bytes, key: tuple[str, ...] = ()) -> WindFile:
        point = PointFile.from_bytes(data)
        where = _hub_height_value(point.tail)
        if where is None:
            raise ValueError('no "hub_height" string in the header of the file')
        start, end = where
        tail = point.tail
        return cls(Piece(tail[:start], (*key, "head")), tail[start:end], Piece(tail[end:], (*key, "rest")),
                   point.digest)

    def splice(self, lat_json: bytes, lon_json: bytes, hub_json: bytes) -> list[bytes]:
        return [b'{"latitude":', lat_json, b',"longitude":', lon_json, self.head, hub_json, self.rest]

    def json_without_coordinates(self) -> bytes:
        return b"{" + self.head[1:] + self.value + self.rest

    @property
    def size(self) -> int:
        return len(self.head) + len(self.value) + len(self.rest)


@dataclass(frozen=True)
class WindSeries:
    """The numbers of one height file, for interpolation."""

    basetime: str
    updated_time: str
    freq: str
    datetimes: list[str]
    u: np.ndarray
    v: np.ndarray
    digest: bytes

    @classmethod
    def from_file(cls, wind: WindFile) -> WindSeries:
        obj = json.loads(wind.json_without_coordinates())
        data = obj["data"]
        times = [entry["datetime"] for entry in data]
        if not all(isinstance(t, str) for t in times):
            raise ValueError("a datetime is not a string")
        columns = []
        for name in ("u_windspd", "v_windspd"):
            values = [entry[name] for entry in data]
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
                raise ValueError(f"{name} holds a non-number")
            column = np.asarray(values, dtype=np.float64)
            if not np.isfinite(column).all():
                raise ValueError(f"{name} is not finite")
            column.setflags(write=False)
            columns.append(column)
        header = [obj[k] for k in ("basetime", "updated_time", "freq")]
        if not all(isinstance(x, str) for x in header):
            raise ValueError("basetime, updated_time and freq must be strings")
        return cls(*header, times, columns[0], columns[1], wind.digest)

    @property
    def size(self) -> int:
        return self.u.nbytes + self.v.nbytes + sum(len(t) + 56 for t in self.datetimes)


def _round(values: np.ndarray, decimals: int) -> list[float]:
    return (np.round(values, decimals) + 0.0).tolist()  # + 0.0: no -0.0


def interpolate_wind(lower: WindSeries, upper: WindSeries, z1: float, z2: float, height: HubHeight) -> bytes:
    """The 2.2 object at a height between two precomputed ones, without its coordinates
    (``b',"basetime": ... }'``, to splice behind them).

    u and v are each linear in ln(z) between z1 and z2 (exact for the neutral logarithmic
    profile); speed and direction follow from the interpolated components."""
    if lower.datetimes != upper.datetimes or (lower.basetime, lower.freq) != (upper.basetime, upper.freq):
        raise ValueError(f"the {z1:g} m and {z2:g} m files do not share their time steps")
    w = math.log(height.metres / z1) / math.log(z2 / z1)
    u = lower.u + (upper.u - lower.u) * w
    v = lower.v + (upper.v - lower.v) * w
    speed = np.hypot(u, v)
    direction = np.round(np.mod(270.0 - np.degrees(np.arctan2(v, u)), 360.0), 1) % 360.0
    direction = np.where(speed == 0.0, 0.0, direction)  # calm: exactly 0
    data = [
        {"datetime": t, "windspd": s, "windir": d, "u_windspd": x, "v_windspd": y}
        for t, s, d, x, y in zip(
            lower.datetimes, _round(speed, 2), _round(direction, 1), _round(u, 2), _round(v, 2)
        )
    ]
    obj = {
        "basetime": lower.basetime,
        "updated_time": lower.updated_time,
        "freq": lower.freq,
        "hub_height": height.text,
        "unit": WIND_UNIT,
        "data": data,
    }
    return b"," + json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()[1:]


def _check_wxdata(obj: Any) -> None:
    """A wxdata element (spec 2.4): an object with numeric lat, lon and the srf, mrf arrays."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    for key in ("lat", "lon"):
        if not isinstance(obj.get(key), (int, float)) or isinstance(obj.get(key), bool):
            raise ValueError(f'"{key}" is not a number')
    for key in ("srf", "mrf"):
        if not isinstance(obj.get(key), list):
            raise ValueError(f'"{key}" is not an array')


class ByteBoundLru:
    """Values by key; the least recently used go first once their sizes add up to more than
    ``limit`` bytes (a value larger than that is not kept)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.size = 0
        self.entries: OrderedDict[tuple[str | bytes, ...], tuple[Any, int]] = OrderedDict()

    def get(self, key: tuple[str | bytes, ...]) -> Any:
        entry = self.entries.get(key)
        if entry is None:
            return None
        self.entries.move_to_end(key)
        return entry[0]

    def put(self, key: tuple[str | bytes, ...], value: Any, size: int) -> None:
        if size <= self.limit:
            self.entries[key] = (value, size)
            self.size += size
            while self.size > self.limit:
                _, (_, old_size) = self.entries.popitem(last=False)
                self.size -= old_size


class Run:
    """Everything cached for one published run: its files and what is made of them, and its
    answers by operation and query text, each within a byte bound of its own (a flood of new
    query texts evicts answers, never the files the next answer is made from)."""

    def __init__(self, run_id: str, path: Path, max_cache_bytes: int, max_answer_bytes: int):
        self.run_id = run_id
        self.path = path
        self._products: dict[str, ProductIndex | None] = {}
        # (kind, product, freq, point id[, height]) -> PointFile | WindFile | WindSeries | ...
        self.files = ByteBoundLru(max_cache_bytes)
        self.answers = ByteBoundLru(max_answer_bytes)  # (path, raw query) -> Answer
        # the catalog's body, ETag, Last-Modified and next update, rendered once per run
        self.catalog: tuple[Piece, bytes, datetime | None, datetime | None] | None = None

    def product(self, product: str) -> ProductIndex | None:
        try:
            return self._products[product]
        except KeyError:
            index = ProductIndex.load(product, self.path / "json" / product / "index.json")
            self._products[product] = index
            return index

    def products(self) -> list[ProductIndex]:
        try:
            names = sorted(os.listdir(self.path / "json"))
        except OSError:
            return []
        found = (self.product(name) for name in names if _PRODUCT_ID.match(name))
        return [p for p in found if p is not None]

    def _read(self, directory: Path, stem: str, what: str) -> bytes | None:
        """``<stem>.json`` (or ``<stem>.json.gz``) of a run directory; None when absent."""
        try:
            return (directory / (stem + ".json")).read_bytes()
        except FileNotFoundError:
            try:
                return gzip.decompress((directory / (stem + ".json.gz")).read_bytes())
            except FileNotFoundError:
                log.error("run %s: no file for %s", self.run_id, what)
                return None

    def point_file(self, product: str, freq: str, point_id: str) -> PointFile | None:
        key = ("point", product, freq, point_id)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        # product and freq come from this module's tables, point_id from index.json.
        data = self._read(self.path / "json" / product / freq, point_id, f"{product}/{freq}/{point_id}")
        if data is None:
            return None
        point = PointFile.from_bytes(data, key=key)
        self.files.put(key, point, len(point.tail))
        return point

    def wx_file(self, product: str, point_id: str) -> PointFile | None:
        """A global or Japan point file (``json/<product>/<point id>.json``: one wxdata
        element; a global one in the point's own time zone)."""
        key = ("wx", product, point_id)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        # product from this module's table, point id from index.json.
        what = f"{product}/{point_id}"
        data = self._read(self.path / "json" / product, point_id, what)
        if data is None:
            return None
        try:
            _check_wxdata(json.loads(data))  # once per file and run, never per request
            point = PointFile.from_bytes(data, WX_LAYOUT, key)
        except ValueError as exc:  # includes invalid JSON and invalid UTF-8
            log.error("run %s: %s is not a wxdata element: %s", self.run_id, what, exc)
            return None
        self.files.put(key, point, len(point.tail))
        return point

    def wx_in_zone(self, product: str, point_id: str, zone: str) -> PointFile | None:
        """A global point's wxdata element in another time zone, rendered from the point's
        precomputed hourly file (``json/<product>/hourly/<point id>.json``) by the function the
        build renders the point's own zone with (products/global_wx.py); once per run."""
        index = self.product(product)
        if index is not None and index.time_zones.get(point_id) == zone:
            return self.wx_file(product, point_id)
        key = ("zone", product, point_id, zone)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        from zoneinfo import ZoneInfo

        from pointcast.products.global_wx import render_zone

        hourly = self.wx_hourly(product, point_id)
        if hourly is None:
            return None
        try:
            element = render_zone([(0.0, 0.0)], *hourly, ZoneInfo(zone))[0]
            point = PointFile.from_bytes(element, WX_LAYOUT, key)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("run %s: %s/%s cannot be rendered in %s: %r", self.run_id, product, point_id, zone, exc)
            return None
        self.files.put(key, point, len(point.tail))
        return point

    def wx_hourly(self, product: str, point_id: str) -> tuple[np.datetime64, dict[str, np.ndarray]] | None:
        """A global point's hourly file, parsed once per run (every zone renders from it)."""
        key = ("hourly", product, point_id)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        from pointcast.products.global_wx import read_hourly

        # product from this module's table, point id from index.json.
        what = f"{product}/hourly/{point_id}"
        data = self._read(self.path / "json" / product / "hourly", point_id, what)
        if data is None:
            return None
        try:
            hourly = read_hourly(data)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("run %s: %s is not an hourly file: %r", self.run_id, what, exc)
            return None
        self.files.put(key, hourly, sum(a.nbytes for a in hourly[1].values()))
        return hourly

    def wind_file(self, product: str, freq: str, point_id: str, metres: float) -> WindFile | None:
        """A precomputed height file (``<freq>/<point id>/<height>m.json``), ready to splice."""
        name = height_name(metres)
        key = ("wind", product, freq, point_id, name)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        # product and freq from this module's tables, point id and height from index.json.
        what = f"{product}/{freq}/{point_id}/{name}"
        data = self._read(self.path / "json" / product / freq / point_id, name, what)
        if data is None:
            return None
        try:
            wind = WindFile.from_bytes(data, key)
        except ValueError as exc:
            log.error("run %s: %s is not a windpack file: %s", self.run_id, what, exc)
            return None
        self.files.put(key, wind, wind.size)
        return wind

    def wind_series(self, product: str, freq: str, point_id: str, metres: float) -> WindSeries | None:
        """The u/v arrays of a precomputed height file, parsed once per run."""
        key = ("series", product, freq, point_id, height_name(metres))
        cached = self.files.get(key)
        if cached is not None:
            return cached
        wind = self.wind_file(product, freq, point_id, metres)
        if wind is None:
            return None
        try:
            series = WindSeries.from_file(wind)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("run %s: %s/%s/%s/%s has no usable u/v series: %r", self.run_id, product, freq, point_id,
                      height_name(metres), exc)
            return None
        self.files.put(key, series, series.size)
        return series

    def wind_between(self, product: str, freq: str, point_id: str, z1: float, z2: float,
                     height: HubHeight) -> tuple[Piece, bytes] | None:
        """The 2.2 object at ``height`` between the precomputed heights z1 < z2, without its
        coordinates (``interpolate_wind``), and a digest of what it is made from; rendered once
        per run and height text. None when a height file is missing; ValueError when the two
        files do not fit together."""
        key = ("between", product, freq, point_id, height.text)
        cached = self.files.get(key)
        if cached is not None:
            return cached
        lower = self.wind_series(product, freq, point_id, z1)
        upper = self.wind_series(product, freq, point_id, z2)
        if lower is None or upper is None:
            return None
        tail = Piece(interpolate_wind(lower, upper, z1, z2, height), key)
        digest = hashlib.blake2b(b"\0".join([lower.digest, upper.digest, repr(height.metres).encode()]),
                                 digest_size=16).digest()
        self.files.put(key, (tail, digest), len(tail))
        return tail, digest

    def deflated(self, piece: Piece) -> Deflated:
        """A piece's deflate form, made at its first gzip answer and cached like the files."""
        key = ("gzip", *piece.key)
        deflated = self.files.get(key)
        if deflated is None:
            deflated = Deflated(piece)
            self.files.put(key, deflated, deflated.size)
        return deflated

    @property
    def cached_files(self) -> int:
        return len(self.files.entries)


# --------------------------------------------------------------------------- responses


@dataclass
class Response:
    status: int
    chunks: list[bytes]  # the body in parts: joined for ASGI, written as they are by HttpTools
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


def error_response(err: ApiError) -> Response:
    body = json.dumps({"status": err.status, "code": err.code, "message": err.message}).encode()
    headers = [
        (b"content-type", JSON_TYPE),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *err.headers,
    ]
    return Response(err.status, [body], headers)


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
            return Response(304, [], response_headers)
    else:
        if_modified_since = header_value(headers, b"if-modified-since")
        if if_modified_since is not None and _not_modified_since(if_modified_since, answer.updated):
            return Response(304, [], response_headers)
    body_parts = answer.parts
    if answer.request_id_at is not None:
        body_parts = list(body_parts)
        body_parts[answer.request_id_at] = str(uuid.uuid4()).encode()
    if gzip:
        body_parts = gzip_chunks(body_parts, answer.deflated)
        response_headers.append((b"content-encoding", b"gzip"))
    response_headers += [(b"content-type", JSON_TYPE), (b"content-length", b"%d" % sum(map(len, body_parts)))]
    return Response(200, body_parts, response_headers)


# --------------------------------------------------------------------------- operations


@dataclass
class Request:
    """What an operation reads: the query's parameters and the run ``respond`` resolved, or
    the error resolving it gave (raised by ``run``, after the operation checked its parameters)."""

    params: dict[str, list[str]]
    resolved: Run | ApiError

    def run(self) -> Run:
        if isinstance(self.resolved, ApiError):
            raise self.resolved
        return self.resolved


Handler = Callable[["PointcastApp", "Operation", Request], Answer]


@dataclass(frozen=True)
class Operation:
    """One GET operation: its path, the product it serves and the handler that answers."""

    name: str  # the spec's section, e.g. "4.1"
    path: str
    product: str | None
    handler: Handler
    params: tuple[str, ...] = ()


def handle_common(app: PointcastApp, op: Operation, request: Request) -> Answer:
    """4.1 / 4.2: the keyed object of section 2.1, one key per requested pair."""
    assert op.product is not None
    latlon = single(request.params, "latlon")
    freq = single(request.params, "freq")
    if freq not in FREQS:
        raise invalid("freq")
    pairs = parse_pairs(latlon, max_pairs_for(freq))

    grid = app.grid(op.product)
    check_coverage(grid, pairs)

    run = request.run()  # resolved once; everything below reads from this run
    index = run.product(op.product)
    if index is None:
        raise no_data(f"no published forecast for {op.product} in the current run")

    seen: set[str] = set()
    parts: list[bytes] = [b"{"]
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([os.fsencode(run.run_id), op.product.encode(), freq.encode(), b""]))
    for pair in pairs:
        if pair.text in seen:  # the same text twice: one key
            continue
        seen.add(pair.text)
        point_id = index.cells.get(grid.cell_key(pair.lat, pair.lon))
        if point_id is None:
            raise no_data(f'"latlon" has no forecast point in its grid cell: {pair.text}')
        point = run.point_file(op.product, freq, point_id)
        if point is None:
            raise no_data(f'"latlon" has no {freq} forecast in the current run: {pair.text}')
        key = json.dumps(pair.text).encode()
        lat_json, lon_json = pair.lat_json, pair.lon_json
        if len(parts) > 1:
            parts.append(b",")
        parts += [key, b":", *point.splice(lat_json, lon_json)]
        tag.update(b"\0".join([key, lat_json, lon_json, point.digest]))
    parts.append(b"}")
    etag = b'"' + tag.hexdigest().encode() + b'"'
    return Answer(parts, etag, index.updated, index.next_update, run.deflated)


def handle_windpack(app: PointcastApp, op: Operation, request: Request) -> Answer:
    """4.3: the keyed object of section 2.2 at the requested hub height.

    A precomputed height of the point is its file, spliced (coordinates and ``hub_height``);
    any other height is interpolated from the two precomputed heights around it."""
    assert op.product is not None
    latlon = single(request.params, "latlon")
    freq = single(request.params, "freq")
    hub_text = single(request.params, "hubheight")
    if freq not in FREQS:
        raise invalid("freq")
    pairs = parse_pairs(latlon, max_pairs_for(freq), check_range=False)
    height = parse_hubheight(hub_text)
    check_pair_ranges(pairs)
    check_hubheight_range(height)

    grid = app.grid(op.product)
    check_coverage(grid, pairs)

    run = request.run()  # resolved once; everything below reads from this run
    index = run.product(op.product)
    if index is None:
        raise no_data(f"no published forecast for {op.product} in the current run")

    hub_json = json.dumps(height.text).encode()
    seen: set[str] = set()
    tails: dict[str, tuple[list[bytes], bytes]] = {}  # point id -> its answer without coordinates
    parts: list[bytes] = [b"{"]
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([os.fsencode(run.run_id), op.product.encode(), freq.encode(), hub_json, b""]))
    for pair in pairs:
        if pair.text in seen:  # the same text twice: one key
            continue
        seen.add(pair.text)
        point_id = index.cells.get(grid.cell_key(pair.lat, pair.lon))
        if point_id is None:
            raise no_data(f'"latlon" has no forecast point in its grid cell: {pair.text}')
        if point_id not in tails:
            tails[point_id] = _wind_at_height(run, op.product, freq, index.heights.get(point_id, ()), point_id,
                                              height, hub_json, pair)
        tail, digest = tails[point_id]
        key = json.dumps(pair.text).encode()
        lat_json, lon_json = pair.lat_json, pair.lon_json
        if len(parts) > 1:
            parts.append(b",")
        parts += [key, b':{"latitude":', lat_json, b',"longitude":', lon_json, *tail]
        tag.update(b"\0".join([key, lat_json, lon_json, digest]))
    parts.append(b"}")
    etag = b'"' + tag.hexdigest().encode() + b'"'
    return Answer(parts, etag, index.updated, index.next_update, run.deflated)


def _wind_at_height(
    run: Run,
    product: str,
    freq: str,
    heights: tuple[float, ...],
    point_id: str,
    height: HubHeight,
    hub_json: bytes,
    pair: Pair,
) -> tuple[list[bytes], bytes]:
    """One point's 2.2 object after its coordinates, and a digest of what it was made from."""
    z = height.metres
    i = bisect_left(heights, z)
    if i < len(heights) and heights[i] == z:  # precomputed: the file itself
        wind = run.wind_file(product, freq, point_id, heights[i])
        if wind is None:
            raise no_data(f'"latlon" has no {freq} wind forecast at {height.text} in the current run: {pair.text}')
        return [wind.head, hub_json, wind.rest], wind.digest
    if i == 0 or i == len(heights):  # never extrapolate, never another height
        log.error("run %s: %s point %s has no precomputed heights around %s",
                  run.run_id, product, point_id, height.text)
        raise no_data(f'"hubheight" {height.text} is not between two precomputed heights of the point: {pair.text}')
    try:
        between = run.wind_between(product, freq, point_id, heights[i - 1], heights[i], height)
    except ValueError as exc:
        log.error("run %s: %s point %s: %s", run.run_id, product, point_id, exc)
        between = None
    if between is None:
        raise no_data(f'"latlon" has no {freq} wind forecast at {height.text} in the current run: {pair.text}')
    tail, digest = between
    return [tail], digest


def handle_global(app: PointcastApp, op: Operation, request: Request) -> Answer:
    """4.4: ``latlon=<lat>/<lon>`` and an optional ``tz``; the answer is 4.5's shape.

    Without ``tz`` the precomputed element in the point's own zone is served; with one, the
    element is rendered once per run and zone from the point's hourly file (``Run.wx_in_zone``).
    """
    text = single(request.params, "latlon")
    parts = text.split("/")
    if len(parts) != 2:
        raise invalid("latlon")
    lat, lon = _number(parts[0]), _number(parts[1])
    if lat is None or lon is None:
        raise invalid("latlon")
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise out_of_range("latlon", text)
    zone = parse_time_zone(single(request.params, "tz")) if "tz" in request.params else None
    return wxdata_answer(app, op, request, lat, lon, "latlon", text, zone)


@functools.cache
def _time_zones() -> dict[str, str]:
    """Every IANA zone name zoneinfo knows (tzdata), by its lower-case form."""
    import zoneinfo

    return {name.lower(): name for name in zoneinfo.available_timezones()}


def parse_time_zone(text: str, name: str = "tz") -> str:
    """An IANA zone name, matched without regard to case: 400_002 when there is no such zone.
    Only names from zoneinfo's own list reach ZoneInfo, so request text never names a file."""
    zone = _time_zones().get(text.lower()) if len(text) <= 64 else None
    if zone is None:
        raise invalid(name)
    return zone


def handle_ss1wx(app: PointcastApp, op: Operation, request: Request) -> Answer:
    """4.5: ``lat`` and ``lon``, answered in Asia/Tokyo."""
    lat_text = single(request.params, "lat")
    lon_text = single(request.params, "lon")
    lat = parse_coordinate(lat_text, "lat")
    lon = parse_coordinate(lon_text, "lon")
    if not -90.0 <= lat <= 90.0:
        raise out_of_range("lat", lat_text)
    if not -180.0 <= lon <= 180.0:
        raise out_of_range("lon", lon_text)
    return wxdata_answer(app, op, request, lat, lon, "lat,lon", f"{lat_text},{lon_text}")


def wxdata_answer(app: PointcastApp, op: Operation, request: Request, lat: float, lon: float,
                  name: str, point_text: str, zone: str | None = None) -> Answer:
    """``{"requestId": <fresh uuid4>, "wxdata": [<the point's element, coordinates echoed>]}``
    (4.4 and 4.5), in ``zone`` when given (4.4's ``tz``).

    The ETag is weak and covers the forecast content only (run, product, zone, echoed
    coordinates, the point file), not the requestId: two answers that differ only in their id
    are equivalent, and a client revalidating with If-None-Match gets 304."""
    assert op.product is not None
    grid = app.grid(op.product)
    if not grid.covers(lat, lon):
        raise outside_coverage(name, point_text)

    run = request.run()  # resolved once; everything below reads from this run
    index = run.product(op.product)
    if index is None:
        raise no_data(f"no published forecast for {op.product} in the current run")
    point_id = index.cells.get(grid.cell_key(lat, lon))
    if point_id is None:
        raise no_data(f'"{name}" has no forecast point in its grid cell: {point_text}')
    point = run.wx_file(op.product, point_id) if zone is None else run.wx_in_zone(op.product, point_id, zone)
    if point is None:
        raise no_data(f'"{name}" has no forecast in the current run: {point_text}')

    lat_json, lon_json = repr(lat).encode(), repr(lon).encode()
    tag = hashlib.blake2b(digest_size=16)
    tag.update(b"\0".join([op.path.encode(), os.fsencode(run.run_id), op.product.encode(), (zone or "").encode(),
                           lat_json, lon_json, point.digest]))
    etag = b'W/"' + tag.hexdigest().encode() + b'"'
    parts = [b'{"requestId":"', b"", b'","wxdata":[', *point.splice(lat_json, lon_json), b"]}"]
    return Answer(parts, etag, index.updated, index.next_update, run.deflated, request_id_at=1)


def handle_catalog(app: PointcastApp, op: Operation, request: Request) -> Answer:
    """What the current run serves: each product with its points, basetime, updated_time."""
    run = request.run()
    if run.catalog is None:
        products = []
        for index in run.products():
            meta = index.meta
            points = []
            for p in meta["points"]:
                if not isinstance(p, dict):
                    continue
                entry = {k: p.get(k) for k in ("id", "name", "lat", "lon")}
                if p.get("hub_heights") not in (None, "", []):
                    entry["hub_heights"] = p["hub_heights"]
                if isinstance(p.get("heights"), list):  # eu-wind: the precomputed heights
                    entry["heights"] = p["heights"]
                points.append(entry)
            freqs = [f for f in FREQS if (run.path / "json" / index.product / f).is_dir()]
            products.append(
                {
                    "product": index.product,
                    "operations": [o.path for o in OPERATIONS.values() if o.product == index.product],
                    "grid": meta.get("grid"),
                    "basetime": meta.get("basetime"),
                    "updated_time": meta.get("updated_time"),
                    "next_update": meta.get("next_update"),
                    "freqs": freqs,
                    "points": points,
                }
            )
        if not products:
            raise no_data("the current run has no products")
        body = Piece(json.dumps({"run_id": run.run_id, "products": products}).encode(), ("catalog",))  # ASCII-safe
        etag = b'"' + hashlib.blake2b(os.fsencode(run.run_id) + b"\0" + body, digest_size=16).hexdigest().encode() + b'"'
        updates = [i.updated for i in run.products() if i.updated is not None]
        nexts = [i.next_update for i in run.products() if i.next_update is not None]
        run.catalog = (body, etag, max(updates, default=None), min(nexts, default=None))
    body, etag, updated, next_update = run.catalog
    return Answer([body], etag, updated, next_update, run.deflated)


def handle_openapi(app: PointcastApp, op: Operation, request: Request) -> Answer:
    """The OpenAPI 3 document of the operations (public: no API key needed)."""
    body, etag = app.openapi
    return Answer([body], etag, None, None, lambda piece: app.openapi_deflated)


OPERATIONS: dict[str, Operation] = {
    op.path: op
    for op in (
        Operation("4.1", "/V1/forecast/medium-range/common", "eu-medium", handle_common, ("latlon", "freq")),
        Operation("4.2", "/V1/forecast/short-range/common", "eu-short", handle_common, ("latlon", "freq")),
        Operation(
            "4.3", "/V1/forecast/short-range/windpack", "eu-wind", handle_windpack, ("latlon", "freq", "hubheight")
        ),
        Operation("4.4", "/api/v2/global/wx", "global", handle_global, ("latlon", "tz")),
        Operation("4.5", "/api/v1/ss1wx", "japan", handle_ss1wx, ("lat", "lon")),
        Operation("catalog", "/catalog", None, handle_catalog),
        Operation("openapi", "/openapi.json", None, handle_openapi),
    )
}
UNGUARDED = frozenset({"/openapi.json"})  # paths answered without an API key
VERIFICATION_PATH = "/verification"  # PointcastApp.verification, apart from the run's operations
VERIFICATION_DIR = "verification"  # under the output root (pointcast.verify)


# --------------------------------------------------------------------------- the viewer (docs/viewer.md)
#
# The page at ``/`` reads the run tree with relative URLs, as it does on a static host serving
# a run's json/ folder; here a URL is answered only when each of its parts is a name of the
# fixed tables (the viewer's files, the run files, products, freqs) or of the run's index
# (point ids, heights), so no file path is built from request text.

_CONTENT_TYPES = {".html": b"text/html; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
                  ".css": b"text/css; charset=utf-8", ".json": JSON_TYPE}


@functools.cache
def viewer_assets() -> dict[str, bytes]:
    """URL path -> bytes of the viewer's own files; ``/`` is its page."""
    assets = {"/" + rel: data for rel, data in viewer.files().items()}
    assets["/"] = assets["/" + viewer.PAGE]
    return assets


def file_response(data: bytes, path: str) -> Response:
    suffix = PurePath(path).suffix if path != "/" else ".html"
    kind = _CONTENT_TYPES.get(suffix, b"text/plain; charset=utf-8")  # LICENSE, VERSIONS
    return Response(200, [data], [(b"content-type", kind), (b"content-length", b"%d" % len(data)),
                                  (b"cache-control", b"no-cache")])


def tree_file(run: Run, path: str) -> Path | None:
    """The file of ``run``'s JSON tree that a viewer URL names (docs/contracts.md has the layout),
    or None: the run files, a product's ``index.json``, its point files (``<freq>/<id>.json``,
    ``<id>.json``, ``hourly/<id>.json``, ``<freq>/<id>/<height>.json``) and the verification files."""
    parts = path[1:].split("/")
    stem = parts[-1].removesuffix(".json")
    base = run.path / "json"
    products = {op.product for op in OPERATIONS.values() if op.product}
    if len(parts) == 1:  # the run's own manifest and report (runs published before the viewer have no copies)
        if parts[0] in viewer.RUN_FILES:
            return base / parts[0] if parts[0] == viewer.HISTORY else run.path / parts[0]
        return None
    if parts[0] == "verification":
        return base / "verification" / parts[1] if len(parts) == 2 and (stem == "index" or stem in products) else None
    index = run.product(parts[0]) if parts[0] in products else None
    if index is None:
        return None
    folder = base / index.product
    if parts[1:] == ["index.json"]:
        return folder / "index.json"
    if len(parts) == 2 and stem in index.point_ids:
        return folder / parts[1]
    if len(parts) == 3 and (parts[1] in FREQS or parts[1] == "hourly") and stem in index.point_ids:
        return folder / parts[1] / parts[2]
    if (len(parts) == 4 and parts[1] in FREQS and parts[2] in index.heights
            and stem in {height_name(m) for m in index.heights[parts[2]]}):
        return folder / parts[1] / parts[2] / parts[3]
    return None


# --------------------------------------------------------------------------- the OpenAPI document


def openapi_document(secured: bool = False) -> dict[str, Any]:
    """The OpenAPI 3 document of OPERATIONS (``secured``: API keys are configured), generated
    from the contract (pointcast.openapi)."""
    return openapi.document(((op.name, op.path, op.params) for op in OPERATIONS.values() if op.name != "openapi"),
                            secured)


# --------------------------------------------------------------------------- the app


def _default_grid_for(product: str) -> Grid:
    from pointcast.grids import grid_for

    return grid_for(product)


class PointcastApp:
    """The ASGI application. Single-threaded by design: one event loop, no awaits between
    resolving ``current`` and building the body, so no locks are needed."""

    def __init__(
        self,
        output_root: Path,
        *,
        max_cache_bytes: int = DEFAULT_CACHE_BYTES,
        max_answer_bytes: int = DEFAULT_ANSWER_BYTES,
        grid_for: Callable[[str], Grid] | None = None,
        clock: Callable[[], float] = time.time,
        api_keys: Iterable[ApiKeyConfig] = (),
    ):
        self.root = Path(output_root)
        self.max_cache_bytes = max_cache_bytes
        self.max_answer_bytes = max_answer_bytes
        self._grid_for = grid_for or _default_grid_for
        self._grids: dict[str, Grid] = {}
        self._run: Run | None = None
        self._link = os.path.join(self.root, "current")
        self._target: str | None = None  # what ``current`` pointed to when ``_run`` was resolved
        self.clock = clock
        self.access = Access(api_keys)
        body = json.dumps(openapi_document(secured=not self.access.open), separators=(",", ":")).encode()
        self.openapi = (Piece(body, ("openapi",)),
                        b'"' + hashlib.blake2b(body, digest_size=16).hexdigest().encode() + b'"')

    @functools.cached_property
    def openapi_deflated(self) -> Deflated:
        return Deflated(self.openapi[0])

    # -- run resolution

    def current_run(self) -> Run:
        """Resolve ``<root>/current`` (one readlink) to the cached ``Run``; 404_002 if none."""
        link = self._link
        try:
            target = os.readlink(link)
        except FileNotFoundError:
            raise no_data("no forecast run published yet") from None
        except OSError as exc:
            log.error("%s is not a symlink to a run: %s", link, exc)
            raise no_data("no forecast run published yet") from None
        run = self._run
        if run is not None and target == self._target:
            return run
        run_id = PurePath(target).name
        if run is None or run.run_id != run_id:
            path = Path(target) if os.path.isabs(target) else self.root / target
            run = Run(run_id, path, self.max_cache_bytes, self.max_answer_bytes)
            if self._run is not None:
                log.info("serving run %s (dropping the caches of run %s)", run_id, self._run.run_id)
            self._run = run  # the previous run's caches go with it
        self._target = target
        return run

    def grid(self, product: str) -> Grid:
        grid = self._grids.get(product)
        if grid is None:
            grid = self._grids[product] = self._grid_for(product)
        return grid

    def warm_up(self) -> None:
        """Build what the first request would otherwise wait for: each operation's grid and
        its coverage (lazily built rasters), and the current run's indexes."""
        probes = [(lat, lon) for lat in (-45.0, 0.0, 36.0, 50.0, 60.0) for lon in (-100.0, 0.0, 10.0, 140.0)]
        for product in sorted({op.product for op in OPERATIONS.values() if op.product}):
            try:
                grid = self.grid(product)
                for lat, lon in probes:
                    if grid.covers(lat, lon):  # requests ask for cells inside the coverage only
                        grid.cell_key(lat, lon)
            except Exception:
                log.exception("warming up the grid of %s failed", product)
        try:
            run = self.current_run()
            for op in OPERATIONS.values():
                if op.product:
                    run.product(op.product)
        except ApiError:
            pass
        except Exception:
            log.exception("warming up the current run failed")

    # -- request handling

    def respond(self, method: str, path: str, query_string: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        if path == VERIFICATION_PATH:
            return self.verification(method, query_string, headers)
        try:
            op = OPERATIONS.get(path)
            if op is None:
                return self.respond_viewer(method, path, headers)
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            if path not in UNGUARDED:
                self.access.admit(headers)
            try:
                run: Run | ApiError = self.current_run()
            except ApiError as err:  # none published: the operation checks its parameters first
                run = err
            key = (path, query_string)
            answer = run.answers.get(key) if isinstance(run, Run) else None
            if answer is None:
                answer = op.handler(self, op, Request(parse_query(query_string, op.params), run))
                if isinstance(run, Run):
                    run.answers.put(key, answer, answer.size)
            return cached_response(answer, headers, self.clock())
        except ApiError as err:
            return error_response(err)
        except Exception:  # a bug: log it, still answer in JSON
            log.exception("unexpected error answering %s %s?%r", method, path, query_string[:200])
            return error_response(ApiError(500, "500_001", "internal error"))

    def verification(self, method: str, query_string: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        """GET /verification: what ``pointcast verify`` wrote (docs/verification.md), the
        index or, with ``product=<id>``, a product's scores. Read from ``<root>/verification/``
        at each request, not from the served run: verification is renewed between cycles."""
        try:
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            self.access.admit(headers)
            params = parse_query(query_string, ("product",))
            name = "index.json"
            if "product" in params:
                product = single(params, "product")
                if not _PRODUCT_ID.match(product):
                    raise invalid("product")
                name = f"{product}.json"
            try:
                data = (self.root / VERIFICATION_DIR / name).read_bytes()
            except OSError:
                raise (no_data("no verification published yet (pointcast verify)") if name == "index.json"
                       else not_found()) from None
            etag = b'"' + hashlib.blake2b(data, digest_size=16).hexdigest().encode() + b'"'
            updated = _parse_time(json.loads(data).get("generated"))
            piece = Piece(data, (VERIFICATION_DIR, name))
            answer = Answer([piece], etag, updated, None, lambda p: Deflated(p))
            return cached_response(answer, headers, self.clock())
        except ApiError as err:
            return error_response(err)
        except Exception:  # a bug (or a file being replaced by hand): log it, answer in JSON
            log.exception("unexpected error answering %s %s?%r", method, VERIFICATION_PATH, query_string[:200])
            return error_response(ApiError(500, "500_001", "internal error"))

    def respond_viewer(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> Response:
        """``GET /`` and the viewer's files (no key: they hold no forecast), and the files of the
        current run's JSON tree that the page reads (``tree_file``; the key as for the operations)."""
        asset = viewer_assets().get(path)
        if asset is not None:
            if method not in ("GET", "HEAD"):
                raise not_allowed()
            return file_response(asset, path)
        if not path.endswith(".json"):
            raise not_found()
        try:
            run = self.current_run()
        except ApiError:
            if path[1:] in viewer.RUN_FILES:  # what the page asks first: it says so
                if method not in ("GET", "HEAD"):
                    raise not_allowed() from None
                raise
            raise not_found() from None
        file = tree_file(run, path)
        if file is None:
            raise not_found()
        if method not in ("GET", "HEAD"):
            raise not_allowed()
        self.access.admit(headers)
        try:
            return file_response(file.read_bytes(), path)
        except FileNotFoundError:  # an optional file (verification), or a run being removed
            raise not_found() from None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            method = scope.get("method", "GET")
            response = self.respond(method, scope.get("path", ""), scope.get("query_string", b""), scope.get("headers", []))
            await send({"type": "http.response.start", "status": response.status, "headers": response.headers})
            await send({"type": "http.response.body", "body": b"" if method == "HEAD" else response.body})
        elif kind == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.warm_up()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})


def create_app(output_root: Path, **options: Any) -> PointcastApp:
    """The ASGI app serving the published run tree under ``output_root``.

    Options: ``max_cache_bytes`` (point file bytes cached per run), ``max_answer_bytes`` (answer
    bytes kept per run, ``Answer.size``), ``grid_for`` (product ->
    grid, default ``pointcast.grids.grid_for``), ``clock`` (for tests), ``api_keys`` (the
    ``[server.api_keys]`` of the configuration; none: the service is open).
    """
    return PointcastApp(Path(output_root), **options)


class HttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol, with two changes.

    A request it cannot parse (raw control or non-ASCII bytes in the request line, a request
    line of 64 KiB or more) is refused with the JSON error body too (``400_002``, ``"request"
    is invalid value``), not with plain text.

    A request to a ``PointcastApp`` is answered in the parser's callback, as soon as its headers
    are in (no operation reads a body): ``respond`` builds the answer from memory and one
    ``writelines`` sends the status line, uvicorn's default headers (``date``), the answer's
    headers and its body parts, with no ASGI task, event or messages per request (they cost
    about as much CPU as building the answer). Pipelined requests are answered in order; while the transport's
    buffer is over its high-water mark they wait, with reading paused, as in uvicorn's own path.
    An access log, when configured, gets uvicorn's line. A WebSocket upgrade and
    ``limit_concurrency`` take uvicorn's own path."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        app = self.config.app
        direct = isinstance(app, PointcastApp) and self.limit_concurrency is None
        self._direct: PointcastApp | None = app if direct else None
        # (method, path, query, headers, HTTP version, keep-alive) of requests waiting for the buffer
        self._waiting: deque[tuple[str, str, bytes, list[tuple[bytes, bytes]], str, bool]] = deque()

    def connection_lost(self, exc: Exception | None) -> None:
        self._waiting.clear()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        if self._direct is None:
            return super().on_message_begin()
        self.url = b""
        self.headers = []

    def on_headers_complete(self) -> None:
        if self._direct is None:
            return super().on_headers_complete()
        if self.parser.should_upgrade() and self._should_upgrade():
            url, headers = self.url, self.headers
            super().on_message_begin()  # the scope of uvicorn's own path
            self.url, self.headers = url, headers
            self.scope["headers"] = headers
            return super().on_headers_complete()
        version = self.parser.get_http_version()
        keep_alive = version != "1.0" and self.parser.should_keep_alive()
        parsed = httptools.parse_url(self.url)
        path = parsed.path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        request = (self.parser.get_method().decode("ascii"), self.root_path + path, parsed.query or b"",
                   self.headers, version, keep_alive)
        if self._waiting or self.flow.write_paused:
            self._waiting.append(request)
            self.flow.pause_reading()
        else:
            self._answer(*request)

    def on_body(self, body: bytes) -> None:
        if self._direct is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._direct is None:
            super().on_message_complete()

    def resume_writing(self) -> None:
        super().resume_writing()
        while self._waiting and not self.flow.write_paused:
            self._answer(*self._waiting.popleft())

    def _answer(self, method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]], version: str,
                keep_alive: bool) -> None:
        if self.transport.is_closing():
            return
        assert self._direct is not None
        response = self._direct.respond(method, path, query, headers)
        if self.access_log:  # the line (and arguments) of uvicorn's access log
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', "%s:%d" % self.client if self.client else "",
                                    method, path + "?" + query.decode("ascii") if query else path, version,
                                    response.status)
        small = [STATUS_LINE[response.status]]
        for name, value in (*self.server_state.default_headers, *response.headers):
            small += [name, b": ", value, b"\r\n"]
        small.append(b"\r\n" if keep_alive else b"connection: close\r\n\r\n")
        buffers = []
        for chunk in response.chunks if method != "HEAD" else ():
            if len(chunk) < 4096:  # small parts are joined, large ones written as they are
                small.append(chunk)
            else:
                buffers += [b"".join(small), chunk]
                small = []
        buffers.append(b"".join(small))
        self.transport.writelines(buffers)
        # uvicorn's on_response_complete, except that waiting requests keep reading paused and
        # the keep-alive timeout unarmed
        self.server_state.total_requests += 1
        if not keep_alive:
            self._waiting.clear()  # nothing after this request is answered
            self.transport.close()
            return
        self._unset_keepalive_if_required()
        if self._waiting:
            self.flow.pause_reading()
        else:
            self.flow.resume_reading()
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)

    def send_400_response(self, msg: str) -> None:
        response = error_response(invalid("request"))
        lines = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in [*self.server_state.default_headers, *response.headers, (b"connection", b"close")]:
            lines += [name, b": ", value, b"\r\n"]
        self.transport.write(b"".join([*lines, b"\r\n", response.body]))
        self.transport.close()


def server_config(
    output_root: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_keys: Iterable[ApiKeyConfig] = (),
    **uvicorn_options: Any,
):
    """The uvicorn configuration ``serve`` runs: uvloop, httptools, no access log (it would
    not log keys, but a log of every request is the operator's choice, not ours)."""
    import uvicorn

    options: dict[str, Any] = dict(
        host=host,
        port=port,
        loop="uvloop",
        http=HttpTools,
        access_log=False,
        lifespan="on",
        server_header=False,
        log_level="info",
    )
    options.update(uvicorn_options)
    return uvicorn.Config(create_app(output_root, api_keys=api_keys), **options)


def serve(
    output_root: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_keys: Iterable[ApiKeyConfig] = (),
    **uvicorn_options: Any,
) -> None:
    """Serve ``output_root`` until interrupted (``pointcast serve``)."""
    import uvicorn

    api_keys = tuple(api_keys)
    config = server_config(output_root, host, port, api_keys, **uvicorn_options)
    log.info("serving %s on http://%s:%d", Path(output_root).resolve(), host, port)
    if api_keys:
        log.info("API keys required (X-API-Key): %s", ", ".join(key.name for key in api_keys))
    else:
        log.warning("no [server.api_keys] configured: the service is open to anyone who can reach it")
    uvicorn.Server(config).run()
