"""The header pass: what each message of a GRIB file is and where its bytes lie.

It reads only the message headers (GRIB2 sections 0-4; ecCodes only for a kind of header not
seen yet) and no values: the values are read later, lazily, straight from the byte ranges found
here (``values``). That avoids cfgrib's per-variable re-indexing of whole files. GRIB1, and
whatever the byte reader does not recognise, is read with ecCodes.
"""

from __future__ import annotations

import bz2
import functools
import os
import shutil
from dataclasses import dataclass, replace as dc_replace
from datetime import UTC, datetime
from pathlib import Path

import eccodes

from .message import CellGridKey, DecodeError, GridKey, Message


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
# searches of its definition tables, and a handle alone is costly) follows from the bytes up
# to the end of section 4 (discipline, centre and tables, local use, grid, product definition)
# except for the times in them. So the header pass reads those bytes itself and asks ecCodes
# only for a header it has not seen with the times blanked (zero-based byte ranges of each
# section): the message length (section 0), the reference time (section 1 octets 13-19),
# DWD's creation time in its local section 254 (octets 8-14), and in section 4 the forecast
# time (octets 19-22) and a statistical product's end time (4.8 octets 35-41, 4.11 octets
# 38-44). Any other byte that differs only costs a miss: a 3-hour and a 6-hour maximum differ
# in the period's length. The times themselves are then read from the bytes, for a kind of
# header whose times ecCodes was seen to read the same way.
_Spans = tuple[tuple[int, int], ...]
_TIMES: dict[int, _Spans] = {0: ((8, 16),), 1: ((12, 19),)}
_LOCAL_TIMES: dict[tuple[int, int], _Spans] = {(78, 254): ((7, 14),)}  # (centre, local definition number): section 2
_PRODUCT_TIMES: dict[int, _Spans] = {0: ((18, 22),), 1: ((18, 22),), 8: ((18, 22), (34, 41)), 11: ((18, 22), (37, 44))}
# Code table 4.4 units in minutes, and where a statistical product's first time range is
# (section 4: number of ranges, the range's unit and its length).
_UNIT_MINUTES = {0: 1, 1: 60, 2: 1440, 10: 180, 11: 360, 12: 720}
_RANGE_AT = {8: (41, 48, 49), 11: (44, 51, 52)}
# Section 4's type of statistical processing (code table 4.10) of templates 4.8 and 4.11.
_PROCESSING_AT = {8: 46, 11: 49}
HEADER_BYTES = 4096  # read at once: sections 0-4 are a few hundred bytes
# Timeless header -> _Described.
_DESCRIBED: dict[bytes, _Described] = {}
# Averages and accumulations since the run start (IFS, ICON) are a window longer at every
# step, and each length would be a miss (a third of ICON-D2's messages), each asked of ecCodes.
# Their timeless header with the length blanked too -> the description ecCodes gave for two
# lengths alike, or _DIFFERS when two lengths were described differently (the length is then
# part of the name, as it is for maxima: those are never blanked); first seen -> its
# (timeless header, description) in _WINDOW_FIRST until a second length confirms it.
_WINDOWS: dict[bytes, _Described | None] = {}
_WINDOW_FIRST: dict[bytes, tuple[bytes, _Described]] = {}
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
    member: int | None = None
    ensemble_type: int | None = None
    ensemble_size: int | None = None


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
            init = datetime(int.from_bytes(head[s1 + 12:s1 + 14], "big"), head[s1 + 14], head[s1 + 15],
                            head[s1 + 16], head[s1 + 17], tzinfo=UTC)
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
            msg = dc_replace(_eccodes_message(h, path, at), length=header.length, number=number, field=field,
                              parts=header.parts)
        finally:
            eccodes.codes_release(h)
        times = (msg.init, msg.start_minutes, msg.end_minutes)
        described = _Described(msg.shortName, msg.typeOfLevel, msg.stepType, msg.grid, msg.level,
                               msg.paramId, msg.units, msg.parameter, header.times() == times,
                               msg.member, msg.ensemble_type, msg.ensemble_size)
        _DESCRIBED[key] = described
        if window is not None and window not in _WINDOWS:
            first = _WINDOW_FIRST.setdefault(window, (key, described))
            if first[0] != key:
                _WINDOWS[window] = described if first[1] == described else _DIFFERS
        return msg
    assert known is not None  # the times are read from the bytes only for a known header
    init, start, end = times
    return Message(path=path, offset=at, length=header.length, shortName=known.shortName,
                   typeOfLevel=known.typeOfLevel, level=known.level, stepType=known.stepType,
                   start_minutes=start, end_minutes=end, init=init, grid=known.grid, edition=2,
                   paramId=known.paramId, units=known.units, parameter=known.parameter, number=number,
                   field=field, parts=header.parts, member=known.member, ensemble_type=known.ensemble_type,
                   ensemble_size=known.ensemble_size)


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
                                 time_ % 100, tzinfo=UTC),
                   grid=grid, edition=edition, paramId=param_id, units=units,
                   parameter=parameter, member=_long(h, "perturbationNumber"),
                   ensemble_type=_long(h, "typeOfEnsembleForecast"),
                   ensemble_size=_long(h, "numberOfForecastsInEnsemble"))


def _long(h, key: str) -> int | None:
    """An integer key ecCodes may not define for a message (None then): the ensemble keys
    exist in the ensemble product templates only."""
    return int(eccodes.codes_get_long(h, key)) if eccodes.codes_is_defined(h, key) else None


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
