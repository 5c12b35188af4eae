"""Gzip answers without compressing per request: constant parts of answers (``Piece``) are
deflated once per run, and an answer's gzip member is assembled from those deflate blocks and
stored blocks for its variable bytes, with the CRC-32 of the whole combined from the parts'.

Python's zlib has no ``crc32_combine``; ``Deflated.after`` is zlib's ``crc32_combine``
(zlib's crc32.c: ``multmodp``, ``x2nmodp`` and ``crc32_combine_op``) with its shift operator
tabulated per piece, so that a combination costs eight table look-ups."""

from __future__ import annotations

import functools
import re
import struct
import zlib
from array import array
from collections.abc import Callable, Iterable


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

