"""Point files ready to splice: the bytes of a published point file cut once, so that an answer
puts the requested coordinates (and, for a windpack height file, the requested ``hub_height``
text) in front of the stored bytes without parsing JSON per request.

The layouts are those of docs/contracts.md: a European file starts with ``{"latitude": <lat>,
"longitude": <lon>, "basetime"``, a global or Japan file (one ``wxdata`` element) with ``{"lat": <lat>,
"lon": <lon>, "srf"``."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from .compress import Piece

log = logging.getLogger(__name__)


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


EU_LAYOUT = SpliceLayout("latitude", "longitude", "basetime")  # the European operations (docs/contracts.md)
WX_LAYOUT = SpliceLayout("lat", "lon", "srf")  # global/wx and ss1wx: one wxdata element


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

    @property
    def size(self) -> int:
        return len(self.head) + len(self.value) + len(self.rest)




def check_wxdata(obj: Any) -> None:
    """A wxdata element: an object with numeric lat, lon and the srf, mrf arrays."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    for key in ("lat", "lon"):
        if not isinstance(obj.get(key), (int, float)) or isinstance(obj.get(key), bool):
            raise ValueError(f'"{key}" is not a number')
    for key in ("srf", "mrf"):
        if not isinstance(obj.get(key), list):
            raise ValueError(f'"{key}" is not an array')

