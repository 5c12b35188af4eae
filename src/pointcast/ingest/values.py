"""A variable's values as a lazy dask array: which messages each block reads, how they combine
into interval values, and the task that decodes them.

Accumulations and since-start averages become the value of the interval (previous step, step];
units become SI by each row's scale and offset (times the factor of a known alternative
encoding, ``checks.judge``). One dask task decodes a block of several steps of one level
straight from the messages' byte ranges, so a run's full fields are never all in memory.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections import defaultdict
from dataclasses import dataclass, replace as dc_replace
from pathlib import Path

import dask.array as da
import eccodes
import numpy as np
from gribapi import bindings as _grib_bindings, gribapi as _gribapi

from ..gribtable import GribField, Processing
from .message import CellGridKey, DecodeError, GridKey, Message
from .scan import field_bytes

_grib_ffi, _grib_lib = _grib_bindings.ffi, _grib_bindings.lib

# A variable's dask blocks hold up to this many steps, and up to this many bytes; and, where
# the run will be sampled at points, a block's steps of every variable at the points up to as
# many bytes (`block_steps`).
MAX_BLOCK_STEPS = 16
BLOCK_BYTES = 32 << 20
# What ecCodes writes at the points a message's bitmap leaves out, before they become NaN.
MISSING = 1e30


def read_values(path: Path, offset: int, length: int, shape: tuple[int, ...], north_first: bool,
                scale: float = 1.0, add: float = 0.0, dtype=np.float32,
                into: np.ndarray | None = None,
                parts: tuple[tuple[int, int], ...] | None = None) -> np.ndarray:
    """Decode one message's values into an array of the grid's ``shape`` ((lat ascending, lon),
    or (cell,)) in canonical units (``raw * scale + add``), NaN where missing. ``parts``: the
    field of a multi-field message (``Message.parts``); ``length`` is then the field's.

    ``into``: a float64 buffer of the message's size to decode into (``dtype`` is then
    float64 and the result a view of it). A block task reuses its thread's buffers from
    message to message: a fresh array would cost its page faults on every message, and ecCodes
    decodes to float64 anyway (its float32 decoding converts from it)."""
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


def block_steps(grid_size: int, planes: int, points: int = 0) -> int:
    """The steps of a variable's dask block: as many as make `BLOCK_BYTES` of a plane of the
    grid (``grid_size`` values, float32), and, at ``points`` points, of the run's ``planes``
    planes a step (every variable at every level) sampled there: an extraction computes whole
    blocks of steps at once (`interp.extract_blocks`), so the steps shrink as the points grow
    and so do its fields at the points. One step at least, `MAX_BLOCK_STEPS` at most."""
    steps = BLOCK_BYTES // (4 * grid_size)
    if points:
        steps = min(steps, BLOCK_BYTES // (4 * points * max(planes, 1)))
    return int(np.clip(steps, 1, MAX_BLOCK_STEPS))


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
    now = terms[0].now
    assert now is not None  # not `_missing`
    first = reads[now]
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
    assert t.now is not None  # `_plane` asks for the terms of a plane with every message
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
               ) -> dict[tuple[int | None, int | None], tuple[_Term, list[Message]]]:
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
        return {(None, key): (_Term(0), [by_level[level]]) for key, level in zip(keys, lv, strict=True)}
    by_key = {(m.end_minutes, m.level): m for m in msgs}
    steps = sorted({m.end_minutes for m in msgs})
    differenced = row.processing in (Processing.ACCUM_SINCE_START, Processing.AVG_SINCE_START)
    if differenced and row.offset:
        raise DecodeError(f"{row.shortName}: an accumulated field cannot have an offset")
    starts = [min(m.start_minutes for m in msgs if m.end_minutes == s) for s in steps]
    out: dict[tuple[int | None, int | None], tuple[_Term, list[Message]]] = {}
    for k, step in enumerate(steps):
        for key, level in zip(keys, lv, strict=True):
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
                used = [now, before] if now is not None and before is not None else []
                term = _Term(0 if used else None, 1 if used else None, window, row.processing, row.per_second)
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
    # on, and cheaper to make than a hash of the arguments.
    return f"read_values-{msg.path}:{msg.offset}.{msg.field}:{row.scale * msg.factor!r}:{row.offset!r}"


def _variable(var: str, rows: list[GribField], rows_msgs: dict, levels: list[int] | None,
              times_min: np.ndarray | None, grid: GridKey | CellGridKey, where: str, uses: dict[str, int],
              per_block: int) -> tuple[str, tuple, dict]:
    """The plan of one variable as a dask array ``(time, [level,] *grid)``, or ``([level,]
    *grid)`` for a constant field, in blocks of ``per_block`` steps (`block_steps`) of one
    level: (name, chunks, blocks), for ``_array``. The graph is written directly, one task per block (it decodes the
    block's messages and takes the differences of windows): assembled from per-message dask
    arrays (stack, subtract, sum), the graph would cost more than the decoding. ``uses`` counts the blocks that read each message, over all variables."""
    used = sorted((str(m.path), m.offset, m.field) for r in rows for m in rows_msgs[r])
    name = f"{var}-" + hashlib.sha1(repr(used).encode()).hexdigest()[:16]
    terms: dict[tuple[int | None, int | None], list[tuple[_Term, list[Message], GribField]]] = defaultdict(list)
    for r in rows:
        # Rows with the same levels are components to add (SNOW_GSP + SNOW_CON); rows with
        # other levels extend the level axis (10u, 100u, 200u).
        own = None if levels is None else sorted({m.level for m in rows_msgs[r]})
        for key, (term, msgs) in _row_terms(r, rows_msgs[r], own, where).items():
            terms[key].append((term, msgs, r))
    constant = times_min is None
    steps: list[int | None] = [None] if times_min is None else [int(t) for t in times_min]
    level_keys = [None] if levels is None else levels
    # Several steps a block: each task then decodes several messages, and the scheduler's
    # cost per task stays small beside the work.
    per_block = 1 if constant else per_block
    time_chunks = [steps[i:i + per_block] for i in range(0, len(steps), per_block)]
    chunks = ((() if constant else (tuple(len(c) for c in time_chunks),))
              + (() if levels is None else ((1,) * len(levels),)) + tuple((n,) for n in grid.shape))
    zeros = (0,) * len(grid.shape)
    blocks = {}
    for c, chunk in enumerate(time_chunks):
        for l, level in enumerate(level_keys):
            index = (() if constant else (c,)) + (() if levels is None else (l,)) + zeros
            reads: dict[str, tuple[int, _Read]] = {}  # read key -> (position among the inputs, read)
            planes = []
            for step in chunk:
                plane_terms = []
                for term, msgs, r in terms.get((step, level), []):
                    at = []
                    for m in msgs:
                        rk = _read_key(m, r)
                        if rk not in reads:  # every message is on ``grid`` (`build_dataset`)
                            reads[rk] = (len(reads), _Read(m.path, m.offset, m.length, grid.shape,
                                                           grid.north_first, r.scale * m.factor,
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
