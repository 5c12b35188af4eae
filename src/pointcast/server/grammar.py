"""The request grammar: the query string, the parameters' syntax and their range and coverage
checks, each failure a 400 or 403 (docs/api.md, "Query string rules" and each
operation's syntax section).

Every parser takes decoded request text and returns plain values; nothing here reads a file,
and no file path is ever built from what it returns."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from ..contract import HUB_HEIGHT_RANGE_M, HUB_HEIGHT_SYNTAX, MAX_NUMBER_CHARS, NUMBER_SYNTAX, PAIR_SEPARATORS
from .errors import invalid, missing, out_of_range, outside_coverage

HUB_HEIGHT_RANGE = tuple(map(Decimal, HUB_HEIGHT_RANGE_M))  # metres, both bounds included, exact
# The grammar is the contract's (pointcast.contract): compiled here once.
_NUMBER = re.compile(NUMBER_SYNTAX + r"\Z")
_PAIR_SEPARATORS = re.compile(PAIR_SEPARATORS)
_HUB_HEIGHT = re.compile(HUB_HEIGHT_SYNTAX + r"\Z")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class Grid(Protocol):
    """A product's grid: whether it covers a point, and the cell a point falls in."""

    def cell_key(self, lat: float, lon: float) -> str: ...

    def covers(self, lat: float, lon: float) -> bool: ...


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
            for part in text.split("&"):
                if part:
                    name, _, value = part.partition("=")
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
        raise invalid(name, "given several times with different values")
    return values[0]


def optional(params: Mapping[str, list[str]], name: str) -> str | None:
    """The one value of an optional parameter, None when absent: 400_002 when empty (given,
    but naming nothing: leave it out instead) or repeated with different values."""
    values = params.get(name)
    if values is None:
        return None
    if any(v != values[0] for v in values[1:]):
        raise invalid(name, "given several times with different values")
    if values[0] == "":
        raise invalid(name, "empty (it is optional: leave it out)")
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


def _two_numbers(text: str, separator: str, name: str) -> tuple[float, float]:
    """``<lat><separator><lon>``, both numbers of the grammar, or 400_002."""
    parts = text.split(separator)
    if len(parts) != 2:
        raise invalid(name)
    lat, lon = _number(parts[0]), _number(parts[1])
    if lat is None or lon is None:
        raise invalid(name)
    return lat, lon


def parse_pairs(value: str, max_pairs: int, name: str = "latlon", *, check_range: bool = True,
                rule: str = "") -> list[Pair]:
    """``lat,lon`` pairs separated by ``;`` or ``|``.

    400_002: too many pairs (the message names the limit, and ``rule``, what sets it, e.g.
    "with freq=1H"), an empty pair, not exactly two numbers, NaN/inf.
    400_003: latitude outside [-90, 90] or longitude outside [-180, 180] (unless
    ``check_range`` is false: then the caller runs ``check_pair_ranges`` later).
    """
    texts = _PAIR_SEPARATORS.split(value)
    if len(texts) > max_pairs:
        raise invalid(name, f"{len(texts)} pairs, more than the {max_pairs} this operation takes"
                            + (f" {rule}" if rule else ""))
    pairs = []
    for text in texts:
        lat, lon = _two_numbers(text, ",", name)
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
    """One decimal degree (ss1wx's ``lat`` / ``lon``), in the syntax of a ``latlon`` number:
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
        raise invalid(name, "not an IANA time zone name (e.g. Europe/Paris)")
    return zone


def parse_lat_slash_lon(text: str, name: str = "latlon") -> tuple[float, float]:
    """global/wx's one point, ``<lat>/<lon>`` with the numbers of ``latlon``: 400_002 when it is not
    that, 400_003 when a coordinate is out of range."""
    lat, lon = _two_numbers(text, "/", name)
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise out_of_range(name, text)
    return lat, lon
