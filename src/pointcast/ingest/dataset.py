"""Decode: a model run's GRIB files -> the canonical, dask-backed dataset.

The wiring of the decode stage: the header pass over the files (``scan``), the messages of
each table row (``checks``), the cell centres of an unstructured grid taken out and kept
(``message``), each variable planned as a lazy dask array (``values``), and the dataset
assembled with its coordinates and attributes. The extract stage then fuses decode and
interpolation block by block.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..catalogue import variable
from ..gribtable import GribField, Need, Processing
from .checks import select
from .message import _CELL_CENTRES, CELL_CENTRE_NAMES, CellGridKey, DecodeError, Message
from .scan import index_file
from .values import _array, _variable, block_steps, read_values

log = logging.getLogger(__name__)

# Threads of the header pass: one a core. The pass is mostly Python (ecCodes only for a kind of
# header not seen yet), so threads beyond the cores only trade the GIL.
INDEX_THREADS = min(8, os.cpu_count() or 1)
LEVEL_DIMS = {"heightAboveGround": "height", "isobaricInhPa": "plev",
              "generalVerticalLayer": "mlev", "generalVertical": "hlev"}


def decode(files: Iterable[Path], fields: Sequence[GribField], *, model: str = "",
           attrs: dict | None = None, points: int = 0, need: Need | None = None) -> xr.Dataset:
    """Decode a model run's files into the canonical dataset.

    Dims: ``time`` (valid time), optional ``height``/``plev``, then ``lat`` (ascending), ``lon``
    or, on an unstructured grid, ``cell``. Messages that no table row names are skipped (and
    counted in the log); fields on a grid other than the run's main grid raise, since one model
    run has one grid. Each message is checked against what its row expects (parameter,
    units, level, statistical processing); a variable whose messages are not is left out, and
    ``attrs["refused"]`` says why (one line a variable; ``checks.select``).

    ``points``: how many points the run will be sampled at, when known (`interp.extract_blocks`):
    the dask blocks then hold fewer steps the more points there are (`values.block_steps`),
    so that the fields at the points of a block stay small.

    ``need``: the rows and steps some product reads (`pointcast.need`); the other messages
    of the files are skipped like those no row names.
    """
    return _dataset(_scanned(files), fields, model, attrs, points, need)


def decode_members(files: Iterable[Path], fields: Sequence[GribField], *, model: str = "",
                   attrs: dict | None = None, points: int = 0, need: Need | None = None
                   ) -> list[tuple[int, xr.Dataset]]:
    """Decode an ensemble run's files into one canonical dataset a member (`decode`), by
    perturbation number (0: the control): each member's messages are a run of their own, its
    messages found by one header pass over the files (an upstream may hold every member in a
    file: ECMWF, DWD). A message without the ensemble keys among them is the control: ECMWF
    publishes the ENS control as the deterministic stream's message since IFS cycle 50r1
    (``sources/ens.py``)."""
    by_member: dict[int, list[Message]] = defaultdict(list)
    for m in _scanned(files):
        by_member[0 if m.member is None else m.member].append(m)
    if not by_member:
        raise DecodeError(f"{model}: no ensemble member's message among the files")
    return [(k, _dataset(by_member[k], fields, model, attrs, points, need)) for k in sorted(by_member)]


def _scanned(files: Iterable[Path]) -> list[Message]:
    """The messages of ``files`` (the header pass), the cell centres of an unstructured grid
    taken out and kept."""
    # Headers of many small files (DWD publishes one field per file): read them in parallel;
    # bz2, file reads and ecCodes release the GIL.
    with ThreadPoolExecutor(max_workers=INDEX_THREADS) as pool:
        messages = [m for msgs in pool.map(index_file, map(Path, files)) for m in msgs]
    return _take_cell_centres(messages)


def _dataset(messages: list[Message], fields: Sequence[GribField], model: str, attrs: dict | None,
             points: int, need: Need | None = None) -> xr.Dataset:
    """The canonical dataset of one run's messages (`decode`)."""
    if need is not None:
        fields = [row for row in fields if any(row == r for r, _ in need.rows)]
    rows_msgs, refused, unused = select(messages, fields, model)
    if need is not None:  # a message past the last step its row is read at: not decoded
        for row in list(rows_msgs):
            rows_msgs[row] = [m for m in rows_msgs[row] if need.wants(row, m.end_minutes)]
            if not rows_msgs[row]:
                del rows_msgs[row]
    if not rows_msgs:
        raise DecodeError(f"{model or 'run'}: no message matches the encoding table"
                          + "".join(f"; {r}" for r in refused))
    if unused:
        log.info("%s: %d messages not in the encoding table were skipped", model, unused)
    grids = {m.grid for ms in rows_msgs.values() for m in ms}
    grid = next(iter(grids)) if len(grids) == 1 else None
    if grid is None:
        raise DecodeError(f"{model}: expected one regular lat/lon grid or one unstructured grid, "
                          f"found {grids}")
    inits = {m.init for ms in rows_msgs.values() for m in ms}
    if len(inits) != 1:
        raise DecodeError(f"{model}: messages of several runs mixed: {sorted(inits)}")
    init = inits.pop()
    times_min = np.array(sorted({m.end_minutes for row, ms in rows_msgs.items()
                                 if row.processing is not Processing.CONSTANT for m in ms}))

    by_var: dict[str, list[GribField]] = defaultdict(list)
    for row in rows_msgs:
        by_var[row.var].append(row)
    planes = sum(1 if rows[0].levels is None else len({m.level for r in rows for m in rows_msgs[r]})
                 for rows in by_var.values() if rows[0].processing is not Processing.CONSTANT)
    per_block = block_steps(int(np.prod(grid.shape)), planes, points)
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
            plans[var] = _variable(var, rows, rows_msgs, None, axis, grid, where, uses, per_block)
            dims = grid.dims if constant else ("time",) + grid.dims
        else:
            level_sets = [tuple(sorted({m.level for m in rows_msgs[r]})) for r in rows]
            levels = sorted({lv for key in level_sets for lv in key})
            if sum(len(set(key)) for key in set(level_sets)) != len(levels):
                raise DecodeError(f"{model}: {var} has overlapping level sets {sorted(set(level_sets))}")
            plans[var] = _variable(var, rows, rows_msgs, levels, axis, grid, where, uses, per_block)
            dim = LEVEL_DIMS[first.typeOfLevel]
            if level_coords.setdefault(dim, levels) != levels:
                raise DecodeError(f"{model}: {var} levels {levels} differ from {level_coords[dim]}")
            dims = (dim,) + grid.dims if constant else ("time", dim) + grid.dims
        var_attrs: dict[str, Any] = {"units": spec.units, "long_name": spec.long_name}
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
    rest: list[Message] = []
    centres: defaultdict[CellGridKey, dict[str, Message]] = defaultdict(dict)
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
