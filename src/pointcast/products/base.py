"""What every product hands the publish stage."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd
import xarray as xr

try:
    from .. import _render
except ImportError:  # installed without a C compiler (setup.py): the same bytes, slower
    # mypy types the name by the first import; both modules have the same functions (_render.pyi)
    from .. import _render_numpy as _render  # type: ignore[no-redef]
from ..config import Point, ProductConfig
from ..contract import FREQ_MINUTES, QUANTILE_DATA, QUANTILE_DIR, QUANTILE_HEIGHTS, QUANTILE_WIND_AT, height_name
from ..ensemble import QUANTILES
from ..facts import ArchiveFacts, FileFacts

if TYPE_CHECKING:
    from ..publish import StagedFiles


class Files(dict):
    """A product's files in memory (relative path -> bytes): what it fills when it is given
    no mapping. ``put`` is the staging tree's (publish.StagedFiles.put), which notes whether a
    file holds a null; here there is nothing to note."""

    def put(self, rel: str, data: bytes, null: bool) -> None:
        self[rel] = data


@dataclass
class ProductOutput:
    files: MutableMapping[str, bytes]  # relative path under json/ -> bytes
    # dims (init_time, point, lead_time[, height]): as the product built it, or, for a run
    # built in slices, read lazily from the run's staged store (publish.ArchiveStage)
    archive: xr.Dataset
    checks: dict = field(default_factory=dict)  # product-specific validation facts
    # What the slices found in the archive rows they built (facts.ArchiveFacts); None: the
    # validation gate finds it in ``archive``.
    facts: ArchiveFacts | None = None
    # What the slices found in the files they wrote (facts.FileFacts); None: the validation
    # gate finds it in ``files``.
    file_facts: FileFacts | None = None


@dataclass(frozen=True)
class RunContext:
    basetime: datetime  # model run time of the product's first model
    generated: datetime  # when the run's products were generated: their updated_time
    next_update: datetime  # when the next run is expected
    models: dict  # model id -> {"init", "source", "synthetic"}


class Product(Protocol):
    id: str
    shortest_horizon_hours: int
    """The shortest `horizon_hours` its build completes with (`pointcast check` refuses less)."""

    @property
    def variables(self) -> tuple[str, ...] | None:
        """The canonical variables its build reads, None for every one its models have: the
        cycle resamples and blends only those."""

    def heights(self, cfg: ProductConfig) -> list[float]: ...

    def expected_files(self, cfg: ProductConfig) -> list[str]: ...

    def build(self, series: xr.Dataset, cfg: ProductConfig, ctx: RunContext,
              files: Files | StagedFiles | None = None) -> ProductOutput:
        """The files and archive of the points of ``cfg`` (the cycle builds a product one
        slice of its points at a time: pointcast.build). The files go into ``files`` as they are
        rendered (the cycle passes the run's staging tree, publish.StagedFiles), a new `Files`
        when None."""

    def index(self, cfg: ProductConfig, ctx: RunContext) -> bytes:
        """`index.json` of the product, over all its points."""

    def inputs(self) -> dict[str, frozenset[str]]:
        """The canonical variables each archived element is computed from, by its name: an
        element whose inputs no model supplies at a lead time is missing there (`build`)."""


def iso(t) -> str:
    """A UTC time as ISO 8601 with its offset, to the second."""
    if isinstance(t, datetime):
        return t.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    return np.datetime_as_string(np.datetime64(t, "s"), unit="s") + "+00:00"


FREQ_STEPS = {freq: np.timedelta64(minutes, "m") for freq, minutes in FREQ_MINUTES.items()}


def freq_series(series: xr.Dataset, cfg: ProductConfig, ctx: RunContext):
    """Yield (freq, step, series aggregated to that step over the horizon), the finest last."""
    from ..interp import aggregate

    start = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
    for freq in sorted(cfg.freqs, key=lambda f: -FREQ_STEPS[f]):
        step = FREQ_STEPS[freq]
        yield freq, step, aggregate(series, start, step, int(np.timedelta64(cfg.horizon_hours, "h") / step))


def published_direction(u, v):
    """Wind direction (from, degrees) as published: one decimal, in [0, 360) (359.97 -> 0.0)."""
    from .. import physics

    direction = np.round(physics.wind_direction(u, v), 1)
    return np.where(direction >= 360.0, direction - 360.0, direction)  # % 360, without the division


@dataclass(frozen=True)
class Texts:
    """The JSON texts of an array's values: a table of the distinct texts and, for every value,
    its index in the table. Formatting then costs one Python call per distinct text, not per
    value: a product's JSON is tens of millions of numbers from a few thousand distinct ones."""

    table: np.ndarray  # object array of bytes
    # Indices into table: of 1-D values (shared by every point) as they are; of 2-D values
    # (time, point) transposed, so that a point's texts are contiguous (a strided gather over
    # thousands of points cost more than the look-up itself).
    index: np.ndarray

    @classmethod
    def of(cls, table, index: np.ndarray) -> Texts:
        return cls(np.asarray(table, dtype=object),
                   np.ascontiguousarray(index.astype(np.int32, copy=False).T))

    @property
    def rows(self) -> int:
        return self.index.shape[-1]

    def at(self, j: int) -> np.ndarray:
        """The texts of column ``j`` (a point) of 2-D values, or of 1-D values (shared by every point)."""
        return self.table[self.index if self.index.ndim == 1 else self.index[j]]


def numbers(values: np.ndarray, decimals: int | None, missing: float | int | None = None) -> Texts:
    """JSON numbers rounded to the element's precision (``decimals``, or None for integers:
    truncated, as ``int``); a gap (NaN) is the element's ``missing`` value, or null where it has
    none, which the validation gate rejects before anything is published. Rounding is Python's ``round`` (of the exact binary value, so 984.85 hPa, stored
    as 984.850000000000023, gives 984.9): numpy's rounds the scaled value, which can land on a
    tie, so the values within a hair of a tie after scaling are rounded by Python. The codes
    and the look-up are compiled (`_render.codes`, `_render.table_index`)."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    codes = np.empty(v.shape, dtype=np.int64)
    scale = 1.0 if decimals is None else 10.0 ** decimals
    lo, hi, ties = _render.codes(v, codes, scale, decimals is None)
    if ties:
        fixed = np.rint(np.array([round(x, decimals) for x in v.reshape(-1)[ties].tolist()])
                        * scale).astype(np.int64)
        codes.reshape(-1)[ties] = fixed
        lo, hi = min(lo, int(fixed.min())), max(hi, int(fixed.max()))
    if hi - lo < 1 << 22 and v.ndim in (1, 2):  # a table over the range of codes: no sort
        index = np.empty(v.shape[::-1], dtype=np.int32)
        distinct = np.frombuffer(_render.table_index(v, codes, lo, hi, index), dtype=np.int64)
        return Texts(np.append(_number_texts(distinct, decimals), _gap_text(missing, decimals)), index)
    ok = np.isfinite(v)
    distinct, inverse = np.unique(codes[ok], return_inverse=True)
    index = np.full(v.shape, len(distinct))
    index[ok] = inverse
    return Texts.of(np.append(_number_texts(distinct, decimals), _gap_text(missing, decimals)), index)


def _gap_text(missing: float | int | None, decimals: int | None) -> bytes:
    """The text of a gap: the element's missing value as its numbers are written, else null."""
    if missing is None:
        return b"null"
    scale = 1 if decimals is None else 10 ** decimals
    return _format_codes(np.array([round(missing * scale)]), decimals)[0]


# decimals -> (the first code, the texts of the codes from it on): a run formats the same few
# thousand numbers millions of times, in every slice and build process.
_TEXTS: dict[int | None, tuple[int, np.ndarray]] = {}
_TEXTS_SPAN = 1 << 20  # codes kept a precision, at most (a few tens of MB)


def _number_texts(codes: np.ndarray, decimals: int | None) -> np.ndarray:
    """The texts of ascending integer codes (value x 10**decimals), from the precision's table."""
    if not len(codes):
        return np.empty(0, dtype=object)
    lo, hi = int(codes[0]), int(codes[-1]) + 1
    first, table = _TEXTS.get(decimals, (lo, np.empty(0, dtype=object)))
    start, end = min(first, lo), max(first + len(table), hi)
    if end - start > _TEXTS_SPAN:
        return _format_codes(codes, decimals)
    if (start, end) != (first, first + len(table)):
        grown = np.empty(end - start, dtype=object)
        grown[:first - start] = _format_codes(np.arange(start, first), decimals)
        grown[first - start:first - start + len(table)] = table
        grown[first - start + len(table):] = _format_codes(np.arange(first + len(table), end), decimals)
        table = grown
        _TEXTS[decimals] = (start, table)
    return table[codes - start]


def _format_codes(codes: np.ndarray, decimals: int | None) -> np.ndarray:
    out = np.empty(len(codes), dtype=object)
    if decimals is None:
        out[:] = [str(k).encode() for k in codes.tolist()]
    else:
        scale = 10 ** decimals
        out[:] = [repr(k / scale + 0.0).encode() for k in codes.tolist()]
    return out


def strings(values) -> Texts:
    """JSON strings of an array of str (labels, time stamps); null for None (an undecidable label)."""
    codes, distinct = pd.factorize(np.asarray(values, dtype=object).ravel(), use_na_sentinel=False)
    # factorize gives None back as NaN, which json.dumps would write as the non-JSON NaN.
    texts = [b"null" if pd.isna(s) else json.dumps(s, ensure_ascii=False).encode() for s in distinct]
    return Texts.of(texts, codes.reshape(np.shape(values)))


class Records:
    """JSON arrays of objects that share their keys (a product's entries), one per point.

    Every column's texts get their key in front once, in one buffer of every column's texts;
    a point's array is then one compiled pass over its rows, copying the texts its columns'
    indices pick from that buffer (`_render.rows`), which is what makes rendering cheap beside
    the decode. The indices are the columns' own (`Texts.index`): no array of every point's
    picks is made, which would be fresh memory the size of the slice's points times its steps
    and columns."""

    def __init__(self, columns: dict[str, Texts]):
        texts: list[bytes] = []
        offsets: list[int] = []
        for i, (key, column) in enumerate(columns.items()):
            prefix = ("{" if i == 0 else ",").encode() + json.dumps(key).encode() + b":"
            offsets.append(len(texts))
            texts += [prefix + t for t in column.table]
        self.columns = list(columns.values())
        self.indices = [c.index for c in self.columns]
        self.offsets = np.array(offsets, dtype=np.int64)
        # Text k is blob[starts[k]:starts[k + 1]].
        self.blob = b"".join(texts)
        self.starts = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=self.starts[1:])
        self.points = max((c.index.shape[0] for c in self.columns if c.index.ndim == 2), default=1)
        self.rows = self.columns[0].rows

    @functools.cached_property
    def null(self) -> np.ndarray:
        """Whether each point's array holds a null, from its columns' texts (a null is always
        a whole text, ``null``) and indices: the staging tree then need not scan every file's bytes for
        one, which was a twentieth of a build. A column's indices are compared, not gathered:
        every number column has a null text, which its points hardly ever use."""
        null = np.zeros(self.points, dtype=bool)
        for column in self.columns:
            codes = np.flatnonzero(column.table == b"null")
            if len(codes):
                used = np.isin(column.index, codes)
                null |= used.any(axis=-1) if used.ndim == 2 else used.any()
        return null

    def at(self, j: int, before: bytes = b"[", after: bytes = b"]") -> bytes:
        """The array of point (column) ``j``, between ``before`` and ``after`` (the rest of
        its file, in the same allocation: a 15-minute file is a megabyte)."""
        if not self.rows:
            return before + after
        return _render.rows(self.blob, self.starts, self.indices, self.offsets, j, before, b"},",
                            b"}" + after)


def array(texts: Texts, j: int) -> bytes:
    """A JSON array of the texts of point (column) ``j``."""
    return b"[" + b",".join(texts.at(j).tolist()) + b"]"


def with_arrays(head: dict, **arrays: bytes) -> bytes:
    """``head`` as a JSON object followed by the already rendered ``arrays``, in that order."""
    parts = [json.dumps(k).encode() + b":" + v for k, v in arrays.items()]
    return dumps(head)[:-1] + b"," * bool(head and parts) + b",".join(parts) + b"}"


def put_with_records(files, rel: str, head: dict, key: str, rows: Records, j: int) -> None:
    """Put ``rel`` into ``files`` (`Files`, publish.StagedFiles): ``head`` as a JSON object
    followed by point ``j``'s array of ``rows`` under ``key``, made in one allocation
    (`Records.at`), with whether it holds a null known from its texts."""
    before = dumps(head)[:-1] + b"," * bool(head) + json.dumps(key).encode() + b":["
    files.put(rel, rows.at(j, before, b"]}"), bool(rows.null[j]) or b"null" in before)


def dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def render_index(product_id: str, path: str, cfg: ProductConfig, ctx: RunContext,
                 point_extra=lambda p: {}, **extra) -> bytes:
    """`index.json` of a product: its points with their grid cells, and the run's times."""
    from ..grids import grid_for

    grid = grid_for(product_id)
    return dumps({
        "product": product_id, "path": path, "grid": grid.name,
        "basetime": iso(ctx.basetime), "updated_time": iso(ctx.generated),
        "next_update": iso(ctx.next_update), "freqs": list(cfg.freqs), **extra,
        "points": [{"id": p.id, "name": p.name, "lat": p.lat, "lon": p.lon,
                    "cell": grid.cell_key(p.lat, p.lon), "elevation": p.elevation,
                    "hub_heights": list(p.hub_heights), **point_extra(p)} for p in cfg.points],
    })


def archive_frame(product_id: str, cfg: ProductConfig, ctx: RunContext, times: np.ndarray,
                  step: np.timedelta64, **coords) -> xr.Dataset:
    """The archive dataset's coordinates and CF/global attributes, before its variables."""
    init = np.datetime64(ctx.basetime.replace(tzinfo=None), "ns")
    out = xr.Dataset(coords={
        "init_time": ("init_time", [init]),
        "point": ("point", [p.id for p in cfg.points]),
        "lead_time": ("lead_time", (times - init).astype("timedelta64[ns]")),
        **coords,
        "latitude": ("point", [p.lat for p in cfg.points]),
        "longitude": ("point", [p.lon for p in cfg.points]),
    })
    out["init_time"].attrs.update(long_name="model run time (basetime)", standard_name="forecast_reference_time")
    out["lead_time"].attrs.update(long_name="time since init_time", standard_name="forecast_period")
    out["latitude"].attrs.update(units="degrees_north", standard_name="latitude")
    out["longitude"].attrs.update(units="degrees_east", standard_name="longitude")
    out.attrs.update(
        title=f"pointcast {product_id}", Conventions="CF-1.10", product=product_id,
        time_step=f"{int(step / np.timedelta64(1, 'm'))} min",
        interval_convention="interval elements describe [time, time + time_step)",
        models=dumps(ctx.models).decode(),
        synthetic=int(any(m.get("synthetic") for m in ctx.models.values())),
    )
    if out.attrs["synthetic"]:
        out.attrs["comment"] = "SYNTHETIC DATA from the embedded sample source, not a real forecast"
    return out


# Quantile variables of the archive: (its name, the series' variable, its units, how the
# series' values convert, its long name). NaN where no ensemble has every member
# (``missing_where``, which validation reads).
QUANTILE_VARIABLES = (
    ("temperature_quantiles", "t2m_q", "degC", -273.15, "quantiles of the ensemble members' 2 m temperature"),
    ("precipitation_quantiles", "tp_q", "mm", 0.0,
     "quantiles of the ensemble members' precipitation in the hour holding the time"),
    ("wind_speed_quantiles", "wspd_q", "m s-1", 0.0, "quantiles of the ensemble members' wind speed"),
)
NO_ENSEMBLE = "lead times no ensemble of the product covers with every member"


def ensemble_archive(out: xr.Dataset, ds: xr.Dataset, heights: bool = False) -> xr.Dataset:
    """Add to a product's archive ``out`` what its series ``ds`` (at the archive's lead
    times) holds of its ensembles (`pointcast.ensemble`): the quantiles, with a ``quantile``
    dimension, the wind speed at 10 m (or at every height: ``heights``, the windpack), and
    the deterministic neighbourhood probability kept beside the published one as a reference
    (`pointcast verify` scores both)."""
    dims = ("init_time", "point", "lead_time")
    if "pop_neighbourhood" in ds:
        out["precipitation_proba_neighbourhood"] = (
            dims, ds["pop_neighbourhood"].transpose("point", "time").values[None].astype(np.float32),
            {"units": "%", "long_name": "neighbourhood probability of at least 0.1 mm of precipitation "
             "in the hour from the deterministic blend (reference)", "valid_min": 0.0, "valid_max": 100.0})
    for name, ref, units, add, about in QUANTILE_VARIABLES:
        if ref not in ds:
            continue
        var = ds[ref]
        if "height" in var.dims:
            var = var if heights else var.sel(height=10.0)
        extra = ("height",) if "height" in var.dims else ()
        values = var.transpose("point", "time", *extra, "quantile").values[None].astype(np.float64) + add
        spec_lo, spec_hi = QUANTILE_DATA[name].valid or (None, None)
        out[name] = (dims + extra + ("quantile",), values.astype(np.float32),
                     {"units": units, "long_name": about, "valid_min": spec_lo, "valid_max": spec_hi,
                      "missing_where": NO_ENSEMBLE})
    if any(name in out for name, *_ in QUANTILE_VARIABLES):
        out["quantile"] = ("quantile", np.array(ds["quantile"].values, dtype=np.float64),
                           {"long_name": "probability of not exceeding the value among the members"})
    return out



def quantile_paths(product_id: str, cfg: ProductConfig) -> list[str]:
    """The quantile files of a product's points (docs/api.md, "Extension: quantiles"): one a
    point when the product has ensembles, else none."""
    return [f"{product_id}/{QUANTILE_DIR}/{p.id}.json" for p in cfg.points] if cfg.ensembles else []


def is_quantile_file(rel: str) -> bool:
    """Whether a product's file (``<product>/...``) is a quantile file, the only files whose
    numbers may be null (where no ensemble covers)."""
    return rel.split("/")[1:2] == [QUANTILE_DIR] and rel.count("/") == 2


def put_quantiles(files: Files | StagedFiles, product_id: str, cfg: ProductConfig, ctx: RunContext,
                  archive: xr.Dataset, step: np.timedelta64,
                  heights: Callable[[Point], list[float]] | None = None) -> None:
    """Put each point's quantile file (`quantile_paths`) into ``files``: the quantile variables
    of the product's ``archive`` (`ensemble_archive`) at the precision of
    `contract.QUANTILE_DATA`, so that a file holds the archive's values as published; null
    where no ensemble covers (an archive without a variable: no ensemble in the run). A
    windpack archive's wind speed has a height: ``heights`` gives each point's own (its
    ladder object's), the file holds the 10 m one as ``wind_speed`` too."""
    if not cfg.ensembles:
        return
    if "quantile" in archive.coords and archive["quantile"].values.tolist() != list(QUANTILES):
        raise ValueError(f"{product_id}: the archive's quantiles {archive['quantile'].values.tolist()} "
                         f"are not {list(QUANTILES)}")
    times = archive.init_time.values[0] + archive.lead_time.values
    shape = (len(cfg.points), len(times), len(QUANTILES))

    def rows(name: str, height: float = 10.0) -> QuantileRows:
        """A variable's rows, at ``height`` where it has heights (the windpack's wind speed)."""
        var = archive.get(name)
        if var is None:
            return QuantileRows(np.full(shape, np.nan), QUANTILE_DATA[name].decimals)
        var = var.isel(init_time=0)
        var = var.sel(height=height) if "height" in var.dims else var
        return QuantileRows(var.transpose("point", "lead_time", "quantile").values.astype(np.float64),
                            QUANTILE_DATA[name].decimals)

    series = {e.name: rows(e.ref) for e in QUANTILE_DATA}
    wind = QUANTILE_DATA["wind_speed_quantiles"].ref
    at_height = {h: rows(wind, h) for h in archive.height.values.tolist()} if heights is not None else {}
    head = {"basetime": iso(ctx.basetime), "updated_time": iso(ctx.generated),
            "start": iso(times[0]), "step_seconds": int(step / np.timedelta64(1, "s")),
            "quantiles": list(QUANTILES), "unit": {e.name: e.unit for e in QUANTILE_DATA}}
    for j, (p, rel) in enumerate(zip(cfg.points, quantile_paths(product_id, cfg), strict=True)):
        extra = {}
        if heights is not None:
            own = heights(p)
            extra = {QUANTILE_HEIGHTS: dumps(own),
                     QUANTILE_WIND_AT: b"{" + b",".join(json.dumps(height_name(h)).encode() + b":"
                                                         + at_height[h].at(j) for h in own) + b"}"}
        data = with_arrays({"product": product_id, "latitude": p.lat, "longitude": p.lon, **head},
                           **{name: r.at(j) for name, r in series.items()}, **extra)
        files.put(rel, data, b"null" in data)


class QuantileRows:
    """The quantile rows of a variable's values (point, time, quantile) as JSON texts: per
    point an array of one array of the quantiles per time, joined in one pass over its texts
    and the separators between them."""

    def __init__(self, values: np.ndarray, decimals: int | None):
        points, steps, width = values.shape
        self.texts = numbers(values.reshape(points, steps * width).T, decimals)
        seps = np.full(steps * width + 1, b",", dtype=object)
        seps[width::width] = b"],["
        seps[0], seps[-1] = b"[[", b"]]"
        self.parts = np.empty(2 * steps * width + 1, dtype=object)
        self.parts[0::2] = seps if steps else [b"[]"]

    def at(self, j: int) -> bytes:
        """The JSON array of point (column) ``j``."""
        if len(self.parts) > 1:
            self.parts[1::2] = self.texts.at(j)
        return b"".join(self.parts.tolist())
