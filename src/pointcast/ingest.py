"""Decode: GRIB files -> a canonical, dask-backed dataset.

One pass reads only the message headers (GRIB2 sections 0-4, ecCodes for a kind of header
not seen yet) to learn what each message is and where it lies; the values are then read
lazily, one dask task per block of steps, straight from their byte ranges. That avoids
cfgrib's per-variable re-indexing of whole files, and lets the extract stage fuse decode and
interpolation so a run's full fields are never all in memory.

The model's encoding table (``sources/<model>.py``) maps messages onto catalogue names;
here accumulations and since-start averages become interval values, units become SI. A
message holding several fields (JMA's MSM files, NCEP's wind pairs) yields one ``Message``
per field. Each message is checked against what its table row expects (parameter, units,
statistical processing; ``judge``), a known alternative encoding converted (IFS tcc in 0-1),
and a variable whose messages are not what the table says is refused with the reason
(``_select``; ``attrs["refused"]``).

Two kinds of horizontal grid are read: regular lat/lon (dims ``lat``, ``lon``) and unstructured
grids (GRIB2 template 3.101, DWD's native ICON grids: dim ``cell`` with the coordinates
``clat``/``clon``). An unstructured grid is named by its ``uuidOfHGrid``; its cell centres
come from the CLAT/CLON messages among the run's files (``tlat``/``tlon`` in ecCodes) and are
kept per UUID for the life of the process, so a run whose source already has them cached need
not carry them. The HTTP source keeps the CLAT/CLON files per UUID on disk and hands them in
with every run on that grid (``sources/remote.py``).
"""

from __future__ import annotations

import bz2
import functools
import hashlib
import logging
import os
import shutil
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace as dc_replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

import dask.array as da
import eccodes
import numpy as np
from gribapi import bindings as _grib_bindings, gribapi as _gribapi
import xarray as xr

from .catalogue import variable
from .sources.base import GribField, Processing
from .sources.icon import CELL_CENTRES

_grib_ffi, _grib_lib = _grib_bindings.ffi, _grib_bindings.lib

log = logging.getLogger(__name__)

# Threads of the header pass: one a core. It is mostly Python now (ecCodes only for a kind of
# header not seen yet), and on 2 cores 4 threads were ~10% slower than 2 (GIL hand-offs).
INDEX_THREADS = min(8, os.cpu_count() or 1)
# A variable's dask blocks hold up to this many steps, and up to this many bytes.
MAX_BLOCK_STEPS = 16
BLOCK_BYTES = 32 << 20
# What ecCodes writes at the points a message's bitmap leaves out, before they become NaN.
MISSING = 1e30
LEVEL_DIMS = {"heightAboveGround": "height", "isobaricInhPa": "plev",
              "generalVerticalLayer": "mlev", "generalVertical": "hlev"}


class DecodeError(RuntimeError):
    """A file or message that cannot be turned into canonical fields."""


@dataclass(frozen=True)
class GridKey:
    """The geometry of a regular lat/lon grid, as the message header states it."""

    nj: int
    ni: int
    lat_first: float
    lon_first: float
    lat_last: float
    lon_last: float

    @property
    def lats(self) -> np.ndarray:
        """Latitudes in ascending order (values are flipped to match)."""
        lo, hi = sorted((self.lat_first, self.lat_last))
        return np.linspace(lo, hi, self.nj)

    @property
    def lons(self) -> np.ndarray:
        """Monotonic longitudes starting in [-180, 180) (they may run past 180 on global grids)."""
        span = (self.lon_last - self.lon_first) % 360.0
        start = (self.lon_first + 180.0) % 360.0 - 180.0
        return start + np.linspace(0.0, span, self.ni)

    @property
    def north_first(self) -> bool:
        return self.lat_first > self.lat_last

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.nj, self.ni)

    @property
    def dims(self) -> tuple[str, ...]:
        return ("lat", "lon")

    def coords(self) -> dict:
        return {"lat": self.lats, "lon": self.lons}


@dataclass(frozen=True)
class CellGridKey:
    """An unstructured grid (GRIB2 template 3.101) as the message header states it."""

    ncell: int
    number: int  # numberOfGridUsed
    uuid: str  # uuidOfHGrid

    north_first = False
    dims = ("cell",)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.ncell,)

    def coords(self) -> dict:
        try:
            clat, clon = _CELL_CENTRES[self.uuid]
        except KeyError:
            raise DecodeError(f"unstructured grid {self.number} ({self.uuid}): no CLAT/CLON "
                              f"among the files and none cached for it") from None
        return {"clat": ("cell", clat), "clon": ("cell", clon)}


# Cell centres (degrees) of the unstructured grids seen so far, by uuidOfHGrid.
_CELL_CENTRES: dict[str, tuple[np.ndarray, np.ndarray]] = {}
# DWD's CLAT and CLON (discipline 0, category 191, numbers 1 and 2; ``sources/icon.py``) as
# rows: never rows of a model's table (they are coordinates, taken out before the rows are
# matched), but what an HTTP source asks a layout for to fetch a grid's centres (remote.py).
CELL_CENTRE_ROWS = tuple(GribField(short, short, "surface", processing=Processing.CONSTANT,
                                   param=param) for param, short in CELL_CENTRES.items())
# ecCodes' names of them (``tlat``, ``tlon``).
CELL_CENTRE_NAMES = tuple(r.shortName for r in CELL_CENTRE_ROWS)


@dataclass(frozen=True)
class Message:
    path: Path
    offset: int
    length: int
    shortName: str
    typeOfLevel: str
    level: int
    stepType: str
    start_minutes: int
    end_minutes: int
    init: datetime
    grid: GridKey | CellGridKey | None  # None for grids this decoder does not handle
    edition: int = 2
    # What the parameter is, as ecCodes reads it (checked against the table's encodings).
    paramId: int = 0
    units: str = ""
    parameter: str = ""  # "discipline/category/number" (GRIB2), "table/indicator" (GRIB1)
    number: int = 1  # the message's place in its file (1-based)
    # A multi-field GRIB2 message (JMA MSM): the field's place in the message (1-based, as
    # wgrib2's "3.2") and the byte ranges (offset, length) of its sections 1-7 in the file,
    # from which a single-field message is assembled to decode it. None: a message of one
    # field, read whole from ``offset``.
    field: int = 1
    parts: tuple[tuple[int, int], ...] | None = None
    factor: float = 1.0  # raw in the message's encoding x factor = raw in the row's (decode)

    @property
    def where(self) -> str:
        """The file and message, as a refusal or an error names them."""
        return f"{self.path.name} message {self.number}" + (f".{self.field}" if self.parts else "")


def plain_grib(path: Path) -> Path:
    """Return a readable GRIB path, decompressing upstream ``.bz2`` files once beside them."""
    if path.suffix != ".bz2":
        return path
    target = path.with_suffix("")
    if not target.exists() or target.stat().st_mtime < path.stat().st_mtime:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with bz2.open(path, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, target)
    return target


def _grid_key(h) -> GridKey | CellGridKey | None:
    get = eccodes.codes_get
    kind = get(h, "gridType")
    if kind == "unstructured_grid":
        return CellGridKey(ncell=get(h, "numberOfDataPoints"), number=get(h, "numberOfGridUsed"),
                           uuid=eccodes.codes_get_string(h, "uuidOfHGrid"))
    if kind != "regular_ll":
        return None
    return GridKey(
        nj=get(h, "Nj"), ni=get(h, "Ni"),
        lat_first=round(get(h, "latitudeOfFirstGridPointInDegrees"), 6),
        lon_first=round(get(h, "longitudeOfFirstGridPointInDegrees"), 6),
        lat_last=round(get(h, "latitudeOfLastGridPointInDegrees"), 6),
        lon_last=round(get(h, "longitudeOfLastGridPointInDegrees"), 6),
    )


# What ecCodes says of a GRIB2 message (shortName, typeOfLevel and stepType are concept
# searches of its definition tables; a handle alone costs ~0.3 ms) follows from the bytes up
# to the end of section 4 (discipline, centre and tables, local use, grid, product definition)
# except for the times in them. So the header pass reads those bytes itself and asks ecCodes
# only for a header it has not seen with the times blanked (zero-based byte ranges of each
# section): the message length (section 0), the reference time (section 1 octets 13-19),
# DWD's creation time in its local section 254 (octets 8-14), and in section 4 the forecast
# time (octets 19-22) and a statistical product's end time (4.8 octets 35-41, 4.11 octets
# 38-44). Any other byte that differs only costs a miss: a 3-hour and a 6-hour maximum differ
# in the period's length. The times themselves are then read from the bytes, for a kind of
# header whose times ecCodes was seen to read the same way.
_TIMES = {0: ((8, 16),), 1: ((12, 19),)}
_LOCAL_TIMES = {(78, 254): ((7, 14),)}  # (centre, local definition number): section 2
_PRODUCT_TIMES = {0: ((18, 22),), 1: ((18, 22),), 8: ((18, 22), (34, 41)), 11: ((18, 22), (37, 44))}
# Code table 4.4 units in minutes, and where a statistical product's first time range is
# (section 4: number of ranges, the range's unit and its length).
_UNIT_MINUTES = {0: 1, 1: 60, 2: 1440, 10: 180, 11: 360, 12: 720}
_RANGE_AT = {8: (41, 48, 49), 11: (44, 51, 52)}
# Section 4's type of statistical processing (code table 4.10) of templates 4.8 and 4.11.
_PROCESSING_AT = {8: 46, 11: 49}
HEADER_BYTES = 4096  # read at once: sections 0-4 are a few hundred bytes
# Timeless header -> _Described.
_DESCRIBED: dict[bytes, "_Described"] = {}
# Averages and accumulations since the run start (IFS, ICON) are a window longer at every
# step, and each length was a miss (a third of ICON-D2's messages, 0.7 ms each in ecCodes).
# Their timeless header with the length blanked too -> the description ecCodes gave for two
# lengths alike, or _DIFFERS when two lengths were described differently (the length is then
# part of the name, as it is for maxima: those are never blanked); first seen -> its
# (timeless header, description) in _WINDOW_FIRST until a second length confirms it.
_WINDOWS: dict[bytes, tuple | None] = {}
_WINDOW_FIRST: dict[bytes, tuple[bytes, tuple]] = {}
_DIFFERS = None


def forget_descriptions() -> None:
    """Drop the header descriptions kept so far (a process's first header pass starts so)."""
    _DESCRIBED.clear()
    _WINDOWS.clear()
    _WINDOW_FIRST.clear()


@dataclass(frozen=True)
class _Described:
    """What ecCodes said of a kind of header (all but the times), and whether the times read
    from its bytes agreed with ecCodes'."""

    shortName: str
    typeOfLevel: str
    stepType: str
    grid: GridKey | CellGridKey | None
    level: int
    paramId: int
    units: str
    parameter: str
    times_from_bytes: bool


@dataclass(frozen=True)
class _Header:
    """Sections 0-4 of one field of a GRIB2 message as bytes, where each section starts, and
    the length of the field's message (``parts``: see ``Message``)."""

    head: bytes
    starts: dict[int, int]
    length: int
    parts: tuple[tuple[int, int], ...] | None = None

    def timeless(self) -> bytes:
        head, starts = bytearray(self.head), self.starts
        spans = dict(_TIMES)
        if 2 in starts:
            centre = int.from_bytes(head[starts[1] + 5:starts[1] + 7], "big")
            spans[2] = _LOCAL_TIMES.get((centre, head[starts[2] + 5]), ())
        spans[4] = _PRODUCT_TIMES.get(self.template, ())
        for section, ranges in spans.items():
            for a, b in ranges:
                head[starts[section] + a:starts[section] + b] = bytes(b - a)
        return bytes(head)

    def lengthless(self, timeless: bytes) -> bytes | None:
        """``timeless`` with the length of its one time range blanked too, for an average or an
        accumulation (code table 4.10: 0, 1); None for any other header."""
        s4, template = self.starts[4], self.template
        if template not in _PROCESSING_AT:
            return None
        count, _, length_at = _RANGE_AT[template]
        if self.head[s4 + count] != 1 or self.head[s4 + _PROCESSING_AT[template]] not in (0, 1):
            return None
        head = bytearray(timeless)
        head[s4 + length_at:s4 + length_at + 4] = bytes(4)
        return bytes(head)

    @property
    def template(self) -> int:
        return int.from_bytes(self.head[self.starts[4] + 7:self.starts[4] + 9], "big")

    def times(self) -> tuple[datetime, int, int] | None:
        """(reference time, start and end of the product in minutes), None where not read here."""
        head, s1, s4 = self.head, self.starts[1], self.starts[4]
        try:
            init = datetime(int.from_bytes(head[s1 + 12:s1 + 14], "big"), *head[s1 + 14:s1 + 18],
                            tzinfo=timezone.utc)
        except ValueError:
            return None
        unit = _UNIT_MINUTES.get(head[s4 + 17])
        if unit is None or self.template not in (0, 1, *_RANGE_AT):
            return None
        start = int.from_bytes(head[s4 + 18:s4 + 22], "big") * unit
        if self.template in (0, 1):
            return init, start, start
        count, unit_at, length_at = _RANGE_AT[self.template]
        unit = _UNIT_MINUTES.get(head[s4 + unit_at])
        if head[s4 + count] != 1 or unit is None:
            return None
        return init, start, start + int.from_bytes(head[s4 + length_at:s4 + length_at + 4], "big") * unit


def _fields(read, at: int, size: int, path: Path) -> tuple[int, list[_Header]] | None:
    """The length of the GRIB2 message at byte ``at`` and the header of each of its fields;
    None for anything else (the end of the file, GRIB1, bytes between messages, a malformed
    message: ecCodes reads those).

    A message holds one field, or several (sections 2, 3 or 4 to 7 repeated after section 7;
    JMA's MSM files): a field is then sections 0 and 1 with the latest sections 2-7 before
    its section 7, and a bitmap section 6 saying "the previous bitmap applies" (indicator
    254) stands for the last one defined. Reading the section lengths up to section 7 costs
    a message of one field a read or two of a few bytes. ``read(n, offset)``: ``os.pread``
    on the file, or the same over bytes in memory (``inspect``)."""
    head = read(HEADER_BYTES, at)
    n_head = len(head)
    if n_head < 16 or head[:4] != b"GRIB" or head[7] != 2:
        return None
    length = int.from_bytes(head[8:16], "big")
    if at + length > size:
        raise DecodeError(f"{path}: message at byte {at} is truncated "
                          f"({length} bytes, {size - at} in the file)")
    end = length - 4  # where 7777 starts
    current: list[tuple[int, int] | None] = [None] * 8  # section -> (position, size)
    fields: list[list] = []
    bitmap = None
    pos, last = 16, 0
    while pos < end:
        tag = head[pos:pos + 6] if pos + 6 <= n_head else read(6, at + pos)
        size_, number = int.from_bytes(tag[:4], "big"), tag[4]
        if (size_ < 5 or not (number > last or (last == 7 and 2 <= number <= 4))
                or number > 7 or pos + size_ > end):
            return None
        current[number] = (pos, size_)
        if number == 6:
            if tag[5] == 0:
                bitmap = current[6]
            elif tag[5] == 254:  # the bitmap defined last applies
                if bitmap is None:
                    return None
                current[6] = bitmap
        elif number == 7:
            if None in (current[1], current[3], current[4], current[5], current[6]):
                return None
            fields.append(current[:])
        pos, last = pos + size_, number
    if pos != end or not fields:
        return None
    if len(fields) == 1:  # contiguous: the message's own bytes up to section 5
        sections = fields[0]
        starts = {n: sections[n][0] for n in range(1, 5) if sections[n] is not None}
        end4 = sections[4][0] + sections[4][1]
        return length, [_Header(head[:end4] if end4 <= n_head else read(end4, at),
                                starts | {0: 0}, length)]
    out = []
    for sections in fields:
        head_parts, starts, at_ = [head[:16]], {0: 0}, 16
        for n in range(1, 5):
            if sections[n] is not None:
                p, n_bytes = sections[n]
                starts[n] = at_
                head_parts.append(head[p:p + n_bytes] if p + n_bytes <= n_head
                                  else read(n_bytes, at + p))
                at_ += n_bytes
        parts = tuple((at + p, n_bytes) for p, n_bytes in filter(None, sections[1:]))
        out.append(_Header(b"".join(head_parts), starts, 16 + sum(n for _, n in parts) + 4, parts))
    return length, out


def index_file(path: Path) -> list[Message]:
    """Read the headers of every field of every message in a GRIB file (no values are decoded)."""
    path = plain_grib(Path(path))
    out: list[Message] = []
    with open(path, "rb") as f:
        fd, at, size, number = f.fileno(), 0, os.fstat(f.fileno()).st_size, 0
        read = functools.partial(os.pread, fd)
        while (found := _fields(read, at, size, path)) is not None:
            length, headers = found
            number += 1
            out += [_message(path, read, at, header, number, k) for k, header in enumerate(headers, 1)]
            at += length
    return out + (_index_with_eccodes(path, at, number) if size > at else [])


def field_bytes(read, at: int, length: int, parts: tuple[tuple[int, int], ...] | None) -> bytes:
    """The bytes of a message of one field: the message at ``at`` itself, or the field
    ``parts`` of a multi-field message assembled into one (section 0 with its new length).
    ``read(n, offset)`` as for ``_fields``."""
    if parts is None:
        return read(length, at)
    sec0 = bytearray(read(16, at))
    sec0[8:16] = (16 + sum(n for _, n in parts) + 4).to_bytes(8, "big")
    return b"".join([bytes(sec0), *(read(n, p) for p, n in parts), b"7777"])


def fields_of(data: bytes, at: int) -> list[bytes] | None:
    """The fields of the GRIB2 message at byte ``at`` of ``data``, each as a message of its
    own; None where ``_fields`` does not read it (GRIB1, a malformed message)."""
    def read(n: int, offset: int) -> bytes:
        return data[offset:offset + n]

    try:
        found = _fields(read, at, len(data), Path("<memory>"))
    except DecodeError:
        return None
    if found is None:
        return None
    return [field_bytes(read, at, h.length, h.parts) for h in found[1]]


def _message(path: Path, read, at: int, header: _Header, number: int, field: int) -> Message:
    where = dict(number=number, field=field, parts=header.parts)
    key = header.timeless()
    known = _DESCRIBED.get(key)
    window = header.lengthless(key) if known is None else None
    if window is not None:
        known = _WINDOWS.get(window)
    times = header.times() if known is not None and known.times_from_bytes else None
    if times is None:
        raw = field_bytes(read, at, header.length, header.parts)
        try:
            h = eccodes.codes_new_from_message(raw)
        except eccodes.CodesInternalError as exc:
            raise DecodeError(f"{path}: unreadable GRIB message {number} (field {field}) at "
                              f"byte {at}: {exc}") from exc
        try:
            msg = dc_replace(_eccodes_message(h, path, at), length=header.length, **where)
        finally:
            eccodes.codes_release(h)
        times = (msg.init, msg.start_minutes, msg.end_minutes)
        described = _Described(msg.shortName, msg.typeOfLevel, msg.stepType, msg.grid, msg.level,
                               msg.paramId, msg.units, msg.parameter, header.times() == times)
        _DESCRIBED[key] = described
        if window is not None and window not in _WINDOWS:
            first = _WINDOW_FIRST.setdefault(window, (key, described))
            if first[0] != key:
                _WINDOWS[window] = described if first[1] == described else _DIFFERS
        return msg
    init, start, end = times
    return Message(path=path, offset=at, length=header.length, shortName=known.shortName,
                   typeOfLevel=known.typeOfLevel, level=known.level, stepType=known.stepType,
                   start_minutes=start, end_minutes=end, init=init, grid=known.grid, edition=2,
                   paramId=known.paramId, units=known.units, parameter=known.parameter, **where)


def _eccodes_message(h, path: Path, offset: int) -> Message:
    """What ecCodes says of the message ``h``, found at byte ``offset`` of ``path``."""
    get, text = eccodes.codes_get_long, eccodes.codes_get_string
    # Named before the steps are asked in minutes: setting stepUnits rewrites the period's
    # unit and length in the handle, and IFS's 10fg3 (a 3-hour maximum) would read as 10fg.
    names = text(h, "shortName"), text(h, "typeOfLevel"), text(h, "stepType")
    edition, param_id, units = get(h, "edition"), get(h, "paramId"), text(h, "units")
    parameter = "/".join(str(get(h, k)) for k in (
        ("discipline", "parameterCategory", "parameterNumber") if edition == 2
        else ("table2Version", "indicatorOfParameter")))
    grid = _grid_key(h)
    eccodes.codes_set(h, "stepUnits", "m")
    start = get(h, "startStep")
    step_type = names[2]
    if edition == 1 and step_type == "instant":
        # ECMWF's GRIB1 writes its accumulations (tp, ssrd ...) as forecasts at the step
        # (time range indicator 0): the parameter says they run from the start, and ecCodes
        # says so in stepTypeForConversion (what its GRIB1 -> GRIB2 conversion uses).
        if _key(h, "stepTypeForConversion") == "accum":
            step_type, start = "accum", 0
    date, time_ = get(h, "dataDate"), get(h, "dataTime")
    return Message(path=path, offset=offset, length=get(h, "totalLength"), shortName=names[0],
                   typeOfLevel=names[1], level=get(h, "level"), stepType=step_type,
                   start_minutes=start, end_minutes=get(h, "endStep"),
                   init=datetime(date // 10000, date // 100 % 100, date % 100, time_ // 100,
                                 time_ % 100, tzinfo=timezone.utc),
                   grid=grid, edition=edition, paramId=param_id, units=units,
                   parameter=parameter)


def _key(h, key: str) -> str | None:
    """A string key ecCodes may not define for a message (None then)."""
    return eccodes.codes_get_string(h, key) if eccodes.codes_is_defined(h, key) else None


def _index_with_eccodes(path: Path, start: int, before: int) -> list[Message]:
    """ecCodes' headers of the messages from byte ``start`` on (GRIB1, or GRIB2 after bytes
    that are not a message), ``before`` messages having been read. A GRIB2 message found so
    is read by ``_fields`` from where ecCodes found it (its fields, if several)."""
    out: list[Message] = []
    with open(path, "rb") as f:
        read, size = functools.partial(os.pread, f.fileno()), os.fstat(f.fileno()).st_size
        f.seek(start)
        number = before
        while True:
            try:
                h = eccodes.codes_grib_new_from_file(f, headers_only=True)
            except eccodes.CodesInternalError as exc:
                raise DecodeError(f"{path}: unreadable GRIB after {number} messages: "
                                  f"{exc}") from exc
            if h is None:
                return out
            number += 1
            try:
                offset = eccodes.codes_get_long(h, "offset")
                found = _fields(read, offset, size, path) if eccodes.codes_get_long(h, "edition") == 2 else None
                if found is None:
                    out.append(dc_replace(_eccodes_message(h, path, offset), number=number))
            finally:
                eccodes.codes_release(h)
            if found is not None:
                out += [_message(path, read, offset, header, number, k)
                        for k, header in enumerate(found[1], 1)]


def read_values(path: Path, offset: int, length: int, shape: tuple[int, ...], north_first: bool,
                scale: float = 1.0, add: float = 0.0, dtype=np.float32,
                into: np.ndarray | None = None,
                parts: tuple[tuple[int, int], ...] | None = None) -> np.ndarray:
    """Decode one message's values into an array of the grid's ``shape`` ((lat ascending, lon),
    or (cell,)) in canonical units (``raw * scale + add``), NaN where missing. ``parts``: the
    field of a multi-field message (``Message.parts``); ``length`` is then the field's.

    ``into``: a float64 buffer of the message's size to decode into (``dtype`` is then
    float64 and the result a view of it). A block task reuses its thread's buffers from
    message to message: a fresh array costs its page faults on every message, a third of
    ecCodes' own decoding time, and ecCodes decodes to float64 anyway (its float32 decoding
    converts from it, more slowly)."""
    with open(path, "rb") as f:
        raw = field_bytes(functools.partial(os.pread, f.fileno()), offset, length, parts)
    if len(raw) != length:
        raise DecodeError(f"{path}: message at byte {offset} is truncated")
    h = eccodes.codes_new_from_message(raw)
    try:
        masked = eccodes.codes_get(h, "bitmapPresent")
        if masked:  # a sentinel no field reaches (the default 9999 is a valid visibility)
            eccodes.codes_set(h, "missingValue", MISSING)
        size = eccodes.codes_get_size(h, "values")
        values = np.empty(size) if into is None else into
        if values.size != size:
            raise DecodeError(f"{path}: message at byte {offset} has {size} values, its grid "
                              f"{values.size}")
        _gribapi.GRIB_CHECK(_grib_lib.grib_get_double_array(
            _gribapi.get_handle(h), b"values", _grib_ffi.cast("double *", values.ctypes.data),
            _grib_ffi.new("size_t *", size)))
    finally:
        eccodes.codes_release(h)
    if masked:
        values[values == MISSING] = np.nan
    if scale != 1.0 or add != 0.0:
        values *= scale
        values += add
    grid = values.astype(dtype, copy=False).reshape(shape)
    return grid[::-1] if north_first else grid


class _Buffers(threading.local):
    """A thread's float64 buffers for the messages its block tasks decode, reused from message
    to message; only those of the grid decoded last are kept."""

    def __init__(self):
        self.size, self.free = 0, []

    def take(self, size: int) -> np.ndarray:
        if size != self.size:
            self.size, self.free = size, []
        return self.free.pop() if self.free else np.empty(size)

    def give(self, buffer: np.ndarray) -> None:
        if buffer.size == self.size:
            self.free.append(buffer)


_BUFFERS = _Buffers()


# The statistical processing a message must carry for each kind of row: it tells apart fields
# that ecCodes names alike (JMA's TCDC and APCP both decode as "unknown" at the surface).
STEP_TYPES = {
    Processing.INSTANT: {"instant"},
    Processing.CONSTANT: {"instant"},
    Processing.ACCUM_SINCE_START: {"accum"},
    Processing.AVG_SINCE_START: {"avg"},
    Processing.INTERVAL: {"max", "min"},
}


def _names(row: GribField, msg: Message) -> bool:
    """Whether ``msg`` is, by its name and level, the field ``row`` names. A row ecCodes
    names nothing for ("unknown") names the parameters of its encodings."""
    return (row.shortName == msg.shortName and row.typeOfLevel == msg.typeOfLevel
            and (not row.levels or msg.level in row.levels)  # None, RUN_LEVELS: any
            and (row.edition is None or row.edition == msg.edition)
            and (row.shortName != "unknown" or not row.encodings
                 or any(e.parameter == msg.parameter for e in row.encodings)))


def _matches(row: GribField, msg: Message) -> bool:
    """Whether ``msg`` is ``row``'s message: its name, level and statistical processing."""
    return _names(row, msg) and msg.stepType in STEP_TYPES[row.processing]


def judge(row: GribField, msg: Message) -> tuple[float, str | None]:
    """Whether a message ``row`` names is what the row expects: (the factor from its encoding
    to the row's first, None), or (0, why not) naming the key that differs. A row without
    encodings is not checked."""
    if not row.encodings:
        return 1.0, None
    for enc in row.encodings:
        if enc.paramId == msg.paramId and enc.parameter in (None, msg.parameter):
            if enc.units != msg.units:
                return 0.0, (f"units {msg.units!r} (paramId {msg.paramId}), the table expects "
                             f"{enc.units!r}")
            return enc.scale, None
    expected = " or ".join(f"{e.paramId}" + (f" ({e.parameter})" if e.parameter else "")
                           + f" in {e.units!r}" for e in row.encodings)
    return 0.0, (f"paramId {msg.paramId} ({msg.parameter}) in {msg.units!r}, the table "
                 f"expects paramId {expected}")


def _select(messages: list[Message], fields: Sequence[GribField], model: str
            ) -> tuple[dict[GribField, list[Message]], list[str], int]:
    """The messages of each table row, the refusals and the number of messages no row names.

    A message a row names (``_names``) is the row's when its statistical processing fits
    (``STEP_TYPES``: GFS's instantaneous and averaged TCDC are two messages, one of them the
    row's) and its parameter and units are one of the row's encodings (``judge``; a
    known alternative is converted by its factor). Where a message fails that check, the
    whole variable is refused: none of its rows is decoded, and the reason (file, message,
    key) is logged and returned. A variable with no message of a fitting processing, where
    messages of that name exist, is refused in the same way."""
    rows_msgs: dict[GribField, list[Message]] = defaultdict(list)
    refused: dict[str, list[str]] = defaultdict(list)
    other_processing: dict[GribField, Message] = {}
    unused = 0
    for m in messages:
        hit = False
        for row in fields:
            if not _names(row, m):
                continue
            if m.stepType not in STEP_TYPES[row.processing]:
                other_processing.setdefault(row, m)
                continue
            hit = True
            factor, why = judge(row, m)
            if why is not None:
                refused[row.var].append(f"{m.where}: {why}")
            else:
                rows_msgs[row].append(m if factor == 1.0 else dc_replace(m, factor=factor))
        unused += not hit
    for row, m in other_processing.items():
        if row.var not in refused and not any(r.var == row.var for r in rows_msgs):
            kinds = sorted(STEP_TYPES[row.processing])
            refused[row.var].append(f"{m.where}: stepType {m.stepType!r} ({m.shortName}), the "
                                    f"table expects {' or '.join(map(repr, kinds))}")
    reasons = []
    for var, why in refused.items():
        more = f" (and {len(why) - 1} more messages)" if len(why) > 1 else ""
        reasons.append(f"{var} refused: {why[0]}{more}")
        log.warning("%s: %s", model or "run", reasons[-1])
        for row in [r for r in rows_msgs if r.var == var]:
            del rows_msgs[row]
    return rows_msgs, reasons, unused


@dataclass(frozen=True)
class _Term:
    """One table row's part of a plane: the value of its message at the step (``now``, an
    index into the plane task's reads; None: no message there, NaN), or the value over the
    interval (previous step, step] taken from two windows that share their start."""

    now: int | None
    before: int | None = None  # the previous window's message, to difference against
    window: tuple = ()  # (start, previous end, end) in minutes, for a differenced or per-second value
    processing: Processing = Processing.INSTANT
    per_second: bool = False


@dataclass(frozen=True)
class _Read:
    """The arguments of ``read_values`` for one message: a plane task reads it itself."""

    path: Path
    offset: int
    length: int
    shape: tuple[int, ...]
    north_first: bool
    scale: float
    add: float
    parts: tuple[tuple[int, int], ...] | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def values(self, into: np.ndarray | None = None) -> np.ndarray:
        """float64: a block narrows the values as it copies them into place, in one pass."""
        return read_values(self.path, self.offset, self.length, self.shape, self.north_first,
                           self.scale, self.add, np.float64, into, self.parts)


def _block(shape: tuple[int, ...], planes: tuple[tuple[_Term, ...], ...], *inputs) -> np.ndarray:
    """A block of one variable, shaped ``shape``: its planes (steps) one after the other.
    ``inputs`` are decoded messages (shared with other blocks), or the ``_Read`` of a message
    only this block uses: that one is decoded here into one of the thread's buffers when a
    plane first needs it, and the buffer is given back after the last plane that does."""
    if all(_missing(terms) for terms in planes):  # in no memory (read-only)
        return np.broadcast_to(np.float32(np.nan), shape)
    last = {i: k for k, terms in enumerate(planes) for t in terms for i in (t.now, t.before)
            if i is not None}
    out = np.empty(shape, np.float32)
    stack = out.reshape(len(planes), *shape[1:]) if len(planes) > 1 else out[None]
    held: dict[int, np.ndarray] = {}
    buffers: dict[int, np.ndarray] = {}
    for k, terms in enumerate(planes):
        for i in (i for t in terms for i in (t.now, t.before) if i is not None and i not in held):
            x = inputs[i]
            if isinstance(x, _Read):
                buffers[i] = _BUFFERS.take(x.size)
                x = x.values(buffers[i])
            held[i] = x
        _plane(terms, held, stack[k])
        for i in [i for i in held if last[i] == k]:
            del held[i]
            if i in buffers:
                _BUFFERS.give(buffers.pop(i))
    return out


def _missing(terms: tuple[_Term, ...]) -> bool:
    return any(t.now is None for t in terms)


def _plane(terms: tuple[_Term, ...], reads: dict[int, np.ndarray], out: np.ndarray) -> None:
    """Write a plane of one variable into ``out``: the sum of its rows' terms (true components
    add up, ICON SNOW_GSP + SNOW_CON; alternative encodings never coexist at a step), computed
    in float64 in the thread's buffers and narrowed (and flipped) in the copy; NaN where a
    part is missing."""
    if _missing(terms):
        out[...] = np.nan
        return
    first = reads[terms[0].now]
    if len(terms) == 1 and not terms[0].window:
        out[...] = first
        return
    scratch = [_BUFFERS.take(first.size).reshape(first.shape) for _ in terms[:2]]
    total = _term(terms[0], reads, scratch[0])
    for t in terms[1:]:
        if total is not scratch[0]:  # the first term was a message's values: add onto a copy
            np.copyto(scratch[0], total)
            total = scratch[0]
        total += _term(t, reads, scratch[1])
    out[...] = total
    for buffer in scratch:
        _BUFFERS.give(buffer.reshape(-1))


def _term(t: _Term, reads: dict[int, np.ndarray], into: np.ndarray) -> np.ndarray:
    """A term's value: its message's, or the interval's (previous step, step], computed in
    ``into``. An average over the interval is ``now + (now - before) * b / w`` for windows
    ``b`` and ``b + w`` long that share their start (the difference of the two integrals)."""
    value = reads[t.now]
    if not t.window:
        return value
    start, prev_end, end = t.window
    width = end - prev_end
    if t.before is not None:
        np.subtract(value, reads[t.before], out=into)
        if t.processing is not Processing.ACCUM_SINCE_START:
            into *= (prev_end - start) / width
            into += value
        value = into
    if t.per_second:
        return np.divide(value, width * 60.0, out=into)
    return value


def _row_terms(row: GribField, msgs: list[Message], levels: list[int] | None, where: str
               ) -> dict[tuple[int, int | None], tuple[_Term, list[Message]]]:
    """One table row's terms, keyed by (step in minutes or None for a constant field, level or
    None), each with the messages its ``now``/``before`` indices refer to.

    Accumulations or averages over each message's window (start, end] become the value of the
    interval (previous end, end]. One rule covers every upstream: a window that continues the
    previous one (same start: IFS and ICON since the run start, GFS inside its 6-hour bucket) is
    differenced against it; a window that starts where the previous one ended (GFS after a
    reset) is already the interval.
    """
    lv = levels if levels is not None else [msgs[0].level]
    keys = [None] if levels is None else levels
    if row.processing is Processing.CONSTANT:
        first_step = min(m.end_minutes for m in msgs)
        by_level = {m.level: m for m in msgs if m.end_minutes == first_step}
        return {(None, key): (_Term(0), [by_level[level]]) for key, level in zip(keys, lv)}
    by_key = {(m.end_minutes, m.level): m for m in msgs}
    steps = sorted({m.end_minutes for m in msgs})
    differenced = row.processing in (Processing.ACCUM_SINCE_START, Processing.AVG_SINCE_START)
    if differenced and row.offset:
        raise DecodeError(f"{row.shortName}: an accumulated field cannot have an offset")
    starts = [min(m.start_minutes for m in msgs if m.end_minutes == s) for s in steps]
    out = {}
    for k, step in enumerate(steps):
        for key, level in zip(keys, lv):
            now = by_key.get((step, level))
            if not differenced:
                out[(step, key)] = (_Term(None if now is None else 0), [] if now is None else [now])
                continue
            start, end = starts[k], np.int64(step)
            prev_end = np.int64(steps[k - 1]) if k else start
            window = (start, prev_end, end)
            if end <= prev_end:  # step 0: no interval ends here
                term, used = _Term(None), []
            elif k and starts[k - 1] == start and steps[k - 1] > start:
                before = by_key.get((steps[k - 1], level))
                ok = now is not None and before is not None
                term = _Term(0 if ok else None, 1 if ok else None, window, row.processing, row.per_second)
                used = [now, before] if ok else []
            elif start == prev_end or (k and starts[k - 1] == start):
                term = _Term(None if now is None else 0, None, window, row.processing, row.per_second)
                used = [now] if now is not None else []
            else:
                raise DecodeError(f"{where}: {row.shortName} window {start}-{end} min does not follow "
                                  f"the previous window ending at {prev_end} min")
            out[(step, key)] = (term, used)
    return out


def _read_key(msg: Message, row: GribField) -> str:
    # The key names the message (and field) and its scaling, which is all the task depends
    # on: cheaper than hashing the arguments (bench/README.md).
    return f"read_values-{msg.path}:{msg.offset}.{msg.field}:{row.scale * msg.factor!r}:{row.offset!r}"


def _variable(var: str, rows: list[GribField], rows_msgs: dict, levels: list[int] | None,
              times_min: np.ndarray | None, grid, where: str, uses: dict[str, int]) -> tuple:
    """The plan of one variable as a dask array ``(time, [level,] *grid)``, or ``([level,]
    *grid)`` for a constant field, in blocks of several steps of one level: (name, chunks,
    blocks), for ``_array``. The graph is written directly, one task per block (it decodes the
    block's messages and takes the differences of windows), because assembling it from
    per-message dask arrays (stack, subtract, sum) cost more than decoding the messages at
    reduced scale. ``uses`` counts the blocks that read each message, over all variables."""
    used = sorted((str(m.path), m.offset, m.field) for r in rows for m in rows_msgs[r])
    name = f"{var}-" + hashlib.sha1(repr(used).encode()).hexdigest()[:16]
    terms: dict[tuple[int, int | None], list[tuple[_Term, list[Message], GribField]]] = defaultdict(list)
    for r in rows:
        # Rows with the same levels are components to add (SNOW_GSP + SNOW_CON); rows with
        # other levels extend the level axis (10u, 100u, 200u).
        own = None if levels is None else sorted({m.level for m in rows_msgs[r]})
        for key, (term, msgs) in _row_terms(r, rows_msgs[r], own, where).items():
            terms[key].append((term, msgs, r))
    constant = times_min is None
    steps = [None] if constant else [int(t) for t in times_min]
    level_keys = [None] if levels is None else levels
    # Several steps a block (up to BLOCK_BYTES): each task then decodes several messages, and
    # the scheduler's cost per task (a few hundred microseconds on threads) stays small.
    per_block = 1 if constant else int(np.clip(BLOCK_BYTES // (4 * np.prod(grid.shape)), 1, MAX_BLOCK_STEPS))
    time_chunks = [steps[i:i + per_block] for i in range(0, len(steps), per_block)]
    chunks = ((() if constant else (tuple(len(c) for c in time_chunks),))
              + (() if levels is None else ((1,) * len(levels),)) + tuple((n,) for n in grid.shape))
    zeros = (0,) * len(grid.shape)
    blocks = {}
    for c, chunk in enumerate(time_chunks):
        for l, key in enumerate(level_keys):
            index = (() if constant else (c,)) + (() if levels is None else (l,)) + zeros
            reads: dict[str, tuple[int, _Read]] = {}  # read key -> (position among the inputs, read)
            planes = []
            for step in chunk:
                plane_terms = []
                for term, msgs, r in terms.get((step, key), []):
                    at = []
                    for m in msgs:
                        g = m.grid
                        rk = _read_key(m, r)
                        if rk not in reads:
                            reads[rk] = (len(reads), _Read(m.path, m.offset, m.length, g.shape,
                                                           g.north_first, r.scale * m.factor,
                                                           r.offset, m.parts))
                        at.append(reads[rk][0])
                    plane_terms.append(dc_replace(term, now=None if term.now is None else at[term.now],
                                                  before=None if term.before is None else at[term.before]))
                planes.append(tuple(plane_terms) or (_Term(None),))
            for rk in reads:
                uses[rk] += 1
            shape = (() if constant else (len(chunk),)) + (() if levels is None else (1,)) + grid.shape
            blocks[(name,) + index] = (shape, tuple(planes), reads)
    return name, chunks, blocks


def _array(name: str, chunks: tuple, blocks: dict, uses: dict[str, int]) -> da.Array:
    """A variable's dask array from its plan. A message read by one block only (most: all but
    the windows a difference needs in the next block too, and the messages two variables share,
    ICON's direct radiation in fdir and ssrd) is read inside that block's task; the others get
    a task of their own, the same key in every variable's graph, so it is read once."""
    dsk: dict = {}
    for block_key, (shape, planes, reads) in blocks.items():
        inputs = []
        for rk, (_, read) in reads.items():  # in position order
            if uses[rk] == 1:
                inputs.append(read)
            else:
                dsk.setdefault(rk, (_Read.values, read))
                inputs.append(rk)
        dsk[block_key] = (_block, shape, planes, *inputs)
    return da.Array(dsk, name, chunks, dtype=np.float32)


def decode(files: Iterable[Path], fields: Sequence[GribField], *, model: str = "",
           attrs: dict | None = None) -> xr.Dataset:
    """Decode a model run's files into the canonical dataset.

    Dims: ``time`` (valid time), optional ``height``/``plev``, then ``lat`` (ascending), ``lon``
    or, on an unstructured grid, ``cell``. Messages that no table row names are skipped (and
    counted in the log); fields on a grid other than the run's main grid raise, since one model
    run has one grid. Each message is checked against what its row expects (parameter,
    units, level, statistical processing); a variable whose messages are not is left out, and
    ``attrs["refused"]`` says why (one line a variable; ``_select``).
    """
    # Headers of many small files (DWD publishes one field per file): read them in parallel;
    # bz2, file reads and ecCodes release the GIL.
    with ThreadPoolExecutor(max_workers=INDEX_THREADS) as pool:
        messages = [m for msgs in pool.map(index_file, map(Path, files)) for m in msgs]
    messages = _take_cell_centres(messages)
    rows_msgs, refused, unused = _select(messages, fields, model)
    if not rows_msgs:
        raise DecodeError(f"{model or 'run'}: no message matches the encoding table"
                          + "".join(f"; {r}" for r in refused))
    if unused:
        log.info("%s: %d messages not in the encoding table were skipped", model, unused)
    grids = {m.grid for ms in rows_msgs.values() for m in ms}
    if None in grids or len(grids) != 1:
        raise DecodeError(f"{model}: expected one regular lat/lon grid or one unstructured grid, "
                          f"found {grids}")
    grid = grids.pop()
    inits = {m.init for ms in rows_msgs.values() for m in ms}
    if len(inits) != 1:
        raise DecodeError(f"{model}: messages of several runs mixed: {sorted(inits)}")
    init = inits.pop()
    times_min = np.array(sorted({m.end_minutes for row, ms in rows_msgs.items()
                                 if row.processing is not Processing.CONSTANT for m in ms}))

    by_var: dict[str, list[GribField]] = defaultdict(list)
    for row in rows_msgs:
        by_var[row.var].append(row)
    plans, layouts = {}, {}
    uses: dict[str, int] = defaultdict(int)
    level_coords: dict[str, list[int]] = {}
    for var, rows in by_var.items():
        spec = variable(var)
        first = rows[0]
        constant = first.processing is Processing.CONSTANT
        axis = None if constant else times_min
        where = str(rows_msgs[first][0].path.parent)
        if first.levels is None:
            plans[var] = _variable(var, rows, rows_msgs, None, axis, grid, where, uses)
            dims = grid.dims if constant else ("time",) + grid.dims
        else:
            level_sets = [tuple(sorted({m.level for m in rows_msgs[r]})) for r in rows]
            levels = sorted({lv for key in level_sets for lv in key})
            if sum(len(set(key)) for key in set(level_sets)) != len(levels):
                raise DecodeError(f"{model}: {var} has overlapping level sets {sorted(set(level_sets))}")
            plans[var] = _variable(var, rows, rows_msgs, levels, axis, grid, where, uses)
            dim = LEVEL_DIMS[first.typeOfLevel]
            if level_coords.setdefault(dim, levels) != levels:
                raise DecodeError(f"{model}: {var} levels {levels} differ from {level_coords[dim]}")
            dims = (dim,) + grid.dims if constant else ("time", dim) + grid.dims
        var_attrs = {"units": spec.units, "long_name": spec.long_name}
        if first.processing is not Processing.CONSTANT:
            # The steps at which this variable exists: interval values span (previous, step].
            var_attrs["steps_minutes"] = sorted({m.end_minutes for r in rows for m in rows_msgs[r]})
        if first.processing is Processing.INTERVAL:
            # A maximum covers the window its message states, which can be shorter than the
            # time since the previous step (IFS to 90 h: the last hour of a 3-hour step).
            starts: dict[int, int] = {}
            for m in (m for r in rows for m in rows_msgs[r]):
                starts[m.end_minutes] = min(starts.get(m.end_minutes, m.start_minutes), m.start_minutes)
            var_attrs["starts_minutes"] = [starts[t] for t in var_attrs["steps_minutes"]]
        layouts[var] = (dims, var_attrs)
    data_vars = {var: xr.Variable(dims, _array(*plans[var], uses), attrs=var_attrs)
                 for var, (dims, var_attrs) in layouts.items()}

    coords = {
        "time": np.array([np.datetime64(init.replace(tzinfo=None), "ns") + np.timedelta64(int(t), "m")
                          for t in times_min], dtype="datetime64[ns]"),
        **grid.coords(),
    }
    coords.update({dim: np.array(levels) for dim, levels in level_coords.items()})
    ds = xr.Dataset(data_vars, coords=coords)
    if "height" in ds.coords:
        ds["height"].attrs.update(units="m", long_name="height above ground")
    if "plev" in ds.coords:
        ds["plev"].attrs.update(units="hPa", long_name="pressure level")
    ds.attrs.update(model=model, init=init.isoformat(), **(attrs or {}))
    if refused:  # one line a refused variable, for the run's manifest
        ds.attrs["refused"] = "\n".join(refused)
    if isinstance(grid, CellGridKey):
        ds.attrs["grid_uuid"] = grid.uuid
    return ds


def _take_cell_centres(messages: list[Message]) -> list[Message]:
    """Keep the cell centres of the unstructured grids among ``messages`` (once per grid UUID)
    and return the other messages."""
    rest, centres = [], defaultdict(dict)
    for m in messages:
        if isinstance(m.grid, CellGridKey) and m.shortName in CELL_CENTRE_NAMES:
            centres[m.grid][m.shortName] = m
        else:
            rest.append(m)
    for grid, pair in centres.items():
        if grid.uuid in _CELL_CENTRES:
            continue
        if set(pair) != set(CELL_CENTRE_NAMES):
            raise DecodeError(f"grid {grid.uuid}: CLAT and CLON must come together, got "
                              f"{sorted(pair)}")
        lat, lon = (read_values(pair[k].path, pair[k].offset, pair[k].length, grid.shape, False,
                                dtype=np.float64, parts=pair[k].parts) for k in CELL_CENTRE_NAMES)
        if not (np.isfinite(lat).all() and np.isfinite(lon).all()
                and np.abs(lat).max() <= 90.0 and np.abs(lon).max() <= 360.0):
            raise DecodeError(f"grid {grid.uuid}: CLAT/CLON are not degrees on every cell")
        _CELL_CENTRES[grid.uuid] = (lat, (lon + 180.0) % 360.0 - 180.0)
        log.info("grid %d (%s): %d cell centres read", grid.number, grid.uuid, grid.ncell)
    return rest
