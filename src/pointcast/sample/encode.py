"""GRIB2 writing shared by the upstreams' encoders: the distinct messages behind a model's
table (``products_of``), canonical values back to an upstream's units (``to_raw``), the
``Encoder`` that writes a run's messages from one template per product, and the ``Writer``
that puts files in place.

What differs between the upstreams (the parameter keys, the file layout, the steps a field is
written at) lives in each upstream's module: ``ifs``, ``icon``, ``gfs``, ``msm``.
"""

from __future__ import annotations

import bz2
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import eccodes
import numpy as np

from ..gribtable import RUN_LEVELS, GribField, Processing
from ..sources.base import ModelSpec
from .grids import CellGrid, SampleGrid


@dataclass(frozen=True)
class Product:
    """One kind of message an upstream writes: a parameter on one level."""

    short_name: str  # as decoded (table value)
    param: str  # upstream name (DWD) or the short name (ECMWF)
    type_of_level: str
    level: int | None  # pressure level (hPa) or model level number where the rows give one
    rows: tuple[GribField, ...]

    @property
    def processing(self) -> Processing:
        return self.rows[0].processing

    @property
    def fine(self) -> bool:
        return any(r.fine for r in self.rows)

    @property
    def scale(self) -> float:
        return self.rows[0].scale

    @property
    def offset(self) -> float:
        return self.rows[0].offset


# Level types whose messages are one per level (the others encode their level in the name:
# IFS 100u, 200u).
LEVELLED = ("isobaricInhPa", "generalVerticalLayer", "generalVertical")
MODEL_LEVEL_TYPES = ("generalVerticalLayer", "generalVertical")


def products_of(model: ModelSpec, run_levels: Mapping[str, tuple[int, ...]] | None = None
                ) -> list[Product]:
    """The distinct messages behind a model's table (a message several rows map to, such as
    ICON's ASWDIR_S or IFS's 10u, is written once). Rows of another GRIB edition than 2
    (IFS's GRIB1 encodings) are not written: the sample writes GRIB2 only. The levels of
    ``RUN_LEVELS`` rows are ``run_levels[typeOfLevel]`` (``Weather.run_levels``)."""
    groups: dict[tuple, list[GribField]] = {}
    for row in model.fields:
        if row.edition not in (None, 2):
            continue
        levels = row.levels
        if levels == RUN_LEVELS:
            levels = (run_levels or {}).get(row.typeOfLevel, ())
            if not levels:
                continue
        for level in levels or (None,):
            # A row over several levels of one name (GFS ``u`` at 80 and 100 m) is one
            # message per level, whatever the level type.
            levelled = row.typeOfLevel in LEVELLED or len(levels or ()) > 1
            key = (row.shortName, row.param or row.shortName, row.typeOfLevel,
                   level if levelled else None)
            groups.setdefault(key, []).append(row)
    out = []
    for (short, param, tol, level), rows in groups.items():
        if len({(r.processing, r.scale, r.offset) for r in rows}) != 1:
            raise ValueError(f"{model.id}: rows of {short}/{param} disagree on processing/scale")
        out.append(Product(short, param, tol, level, tuple(rows)))
    return out


def to_raw(canonical: np.ndarray, product: Product, param_id: int | None = None) -> np.ndarray:
    """Canonical values -> the upstream's encoding (canonical = raw * scale + offset), in the
    row's encoding of ``param_id`` where given (IFS tcc 164 is a fraction, 228164 per cent)."""
    scale = product.scale
    if param_id is not None:
        scale *= next((e.scale for e in product.rows[0].encodings if e.paramId == param_id), 1.0)
    if scale == 1.0 and product.offset == 0.0:
        return canonical
    return (canonical - product.offset) / scale


def quantity(product: Product, name: Any) -> Any:
    """The canonical quantity ``name`` a product encodes, with its level where the product's
    level type is one message per level."""
    return (name, product.level) if product.type_of_level in LEVELLED else name


def set_parameter(h: int, keys: dict[str, int]) -> None:
    """Set a parameter's GRIB2 keys (a template number first: setting it resets the others)."""
    eccodes.codes_set(h, "productDefinitionTemplateNumber",
                      keys.pop("productDefinitionTemplateNumber", 0))
    eccodes.codes_set(h, "discipline", 0)
    for k, v in keys.items():
        eccodes.codes_set(h, k, v)


# Level keys shared by the centres' parameter tables.
H2 = dict(typeOfFirstFixedSurface=103, scaleFactorOfFirstFixedSurface=0,
          scaledValueOfFirstFixedSurface=2)
H10 = dict(typeOfFirstFixedSurface=103, scaleFactorOfFirstFixedSurface=0,
           scaledValueOfFirstFixedSurface=10)
# DWD writes the surface with scale factor and value 0 (not missing), as in its real files.
SFC = dict(typeOfFirstFixedSurface=1, scaleFactorOfFirstFixedSurface=0,
           scaledValueOfFirstFixedSurface=0)

_CENTRE_KIND = {"ecmf": "ecmwf", "edzw": "dwd", "rjtd": "jma", "kwbc": "ncep"}


@dataclass(frozen=True)
class EnsembleKeys:
    """How an upstream labels its ensemble members in GRIB2 (product definition templates
    4.1 and 4.11, the ensemble twins of 4.0 and 4.8; typeOfGeneratingProcess 4, ensemble
    forecast). Code table 4.6 (typeOfEnsembleForecast) and 1.4 (typeOfProcessedData) as each
    centre uses them: see ``sample.ensemble``."""

    size: int  # numberOfForecastsInEnsemble as the upstream writes it
    control_type: int  # typeOfEnsembleForecast of the control (perturbationNumber 0)
    perturbed_type: int  # ... of a perturbed member
    control_data: int  # typeOfProcessedData of the control
    perturbed_data: int  # ... of a perturbed member


_ENSEMBLE_TEMPLATE = {0: 1, 8: 11}


class Encoder:
    """GRIB2 messages of one model run: a base message with the grid, centre, reference time
    and packing, cloned once per product into a template that is reused for every step."""

    def __init__(self, grid: SampleGrid | CellGrid, init: datetime, *, centre: str, packing: str,
                 parameter: Callable[[int, Product], None], bits: int = 16,
                 process_id: int | None = None, vertical: tuple[int, int, str] | None = None,
                 ensemble: EnsembleKeys | None = None):
        """``parameter(handle, product)`` sets the keys naming ``product``'s parameter, as the
        upstream encodes it; ``ensemble``: the run is an ensemble's, every message a member's
        (``message(member=...)``)."""
        self.kind = _CENTRE_KIND[centre]
        base = eccodes.codes_grib_new_from_samples("GRIB2")
        s = eccodes.codes_set
        s(base, "centre", centre)
        if self.kind == "jma":
            # Master tables 2 and local tables 1, as in JMA's GRIB2 format descriptions (the
            # same in its radar and nowcast GPV); not checked against a real MSM file.
            s(base, "subCentre", 0)
            s(base, "tablesVersion", 2)
            s(base, "localTablesVersion", 1)
        elif self.kind == "ncep":
            # As in a real GFS file (tables 2, local tables 1, subcentre 0).
            s(base, "subCentre", 0)
            s(base, "tablesVersion", 2)
            s(base, "localTablesVersion", 1)
        elif self.kind == "ecmwf":
            s(base, "subCentre", 0)
            s(base, "tablesVersion", 33)
            s(base, "grib2LocalSectionPresent", 1)
            s(base, "localDefinitionNumber", 1)
            s(base, "marsClass", "od")
            # An ensemble's members: stream enfo, type cf (control) or pf (``message``).
            s(base, "marsType", "cf" if ensemble else "fc")
            s(base, "marsStream", "enfo" if ensemble else "oper")
            s(base, "experimentVersionNumber", "0001")
        else:
            s(base, "subCentre", 255)
            s(base, "tablesVersion", 19)
            s(base, "localTablesVersion", 1)
        s(base, "significanceOfReferenceTime", 1)
        s(base, "productionStatusOfProcessedData", 0)
        s(base, "typeOfProcessedData", 1)  # forecast products
        s(base, "dataDate", int(init.strftime("%Y%m%d")))
        s(base, "dataTime", int(init.strftime("%H%M")))
        # A sphere of 6371229 m (6): DWD and ECMWF open data, and JMA's MSM (a public decoder
        # of the real Lsurf files, sus304/MSMgrib2Decorder after JMA's technical information
        # No. 500, refuses any other shape).
        if isinstance(grid, CellGrid):
            # DWD's native grids: template 3.101, the grid named by number and UUID (the
            # shape of the earth comes after the template, which resets it).
            s(base, "gridDefinitionTemplateNumber", 101)
            s(base, "numberOfDataPoints", len(grid.lats))
            s(base, "numberOfGridUsed", grid.number)
            s(base, "numberOfGridInReference", 1)
            eccodes.codes_set_string(base, "uuidOfHGrid", grid.uuid)
        s(base, "shapeOfTheEarth", 6)
        if isinstance(grid, SampleGrid):
            nlat, nlon = grid.shape
            s(base, "Ni", nlon)
            s(base, "Nj", nlat)
            s(base, "iScansNegatively", 0)
            s(base, "jScansPositively", 1 if grid.south_to_north else 0)
            s(base, "latitudeOfFirstGridPointInDegrees", float(grid.lats[0]))
            s(base, "longitudeOfFirstGridPointInDegrees", float(grid.lons[0]))
            s(base, "latitudeOfLastGridPointInDegrees", float(grid.lats[-1]))
            s(base, "longitudeOfLastGridPointInDegrees", float(grid.lons[-1]))
            s(base, "iDirectionIncrementInDegrees", grid.dlon)
            s(base, "jDirectionIncrementInDegrees", grid.dlat)
        s(base, "typeOfGeneratingProcess", 4 if ensemble else 2)
        if process_id is not None:
            s(base, "generatingProcessIdentifier", process_id)
        s(base, "packingType", packing)
        s(base, "bitsPerValue", bits)
        self.bits = bits
        self.parameter = parameter
        # (nlev, numberOfVGridUsed, uuidOfVGrid) of the model levels' vertical grid.
        self.vertical = vertical
        self.ensemble = ensemble
        self._base = base
        self._templates: dict[tuple, int] = {}
        self._statistical: dict[tuple, bool] = {}

    def close(self) -> None:
        for h in self._templates.values():
            eccodes.codes_release(h)
        eccodes.codes_release(self._base)
        self._templates.clear()

    def _model_level(self, h: int, product: Product) -> None:
        """Level keys on the generalized vertical height coordinate (code table 4.5: 150), as
        DWD writes them: the vertical-grid header (NV = 6: number of half levels, the grid's
        number and UUID), full level L as the layer between half levels L and L+1
        (generalVerticalLayer), half level L with mean sea level as the second surface for
        HHL, the height above sea level (generalVertical)."""
        if self.vertical is None:
            raise ValueError(f"{product.param}: model levels need the vertical grid")
        if product.level is None:
            raise ValueError(f"{product.param}: a {product.type_of_level} message needs a level")
        level = product.level
        nlev, number, uuid = self.vertical
        s = eccodes.codes_set
        s(h, "genVertHeightCoords", 1)
        s(h, "typeOfLevel", product.type_of_level)
        s(h, "nlev", nlev)
        s(h, "numberOfVGridUsed", number)
        eccodes.codes_set_string(h, "uuidOfVGrid", uuid)
        s(h, "scaleFactorOfFirstFixedSurface", 0)
        s(h, "scaledValueOfFirstFixedSurface", int(level))
        if product.type_of_level == "generalVerticalLayer":
            s(h, "typeOfSecondFixedSurface", 150)
            s(h, "scaleFactorOfSecondFixedSurface", 0)
            s(h, "scaledValueOfSecondFixedSurface", int(level) + 1)
        else:
            s(h, "typeOfSecondFixedSurface", 101)

    def _template(self, product: Product, minutes: bool) -> int:
        key = (product.short_name, product.param, product.type_of_level, product.level,
               minutes)
        h = self._templates.get(key)
        if h is None:
            h = eccodes.codes_clone(self._base)
            self.parameter(h, product)
            if self.ensemble:
                # Template 4.0 -> 4.1, 4.8 -> 4.11: ecCodes keeps the keys both have.
                number = eccodes.codes_get_long(h, "productDefinitionTemplateNumber")
                eccodes.codes_set(h, "productDefinitionTemplateNumber", _ENSEMBLE_TEMPLATE[number])
                eccodes.codes_set(h, "numberOfForecastsInEnsemble", self.ensemble.size)
            if product.type_of_level == "isobaricInhPa":
                if product.level is None:
                    raise ValueError(f"{product.param}: an isobaricInhPa message needs a level")
                eccodes.codes_set(h, "typeOfLevel", "isobaricInhPa")
                eccodes.codes_set(h, "level", int(product.level))
            elif product.type_of_level in MODEL_LEVEL_TYPES:
                self._model_level(h, product)
            eccodes.codes_set_long(h, "stepUnits", 0 if minutes else 1)
            self._statistical[key] = (
                eccodes.codes_get_long(h, "productDefinitionTemplateNumber") in (8, 11))
            self._templates[key] = h
        return h

    def message(self, product: Product, values: np.ndarray, *, end: int, start: int = 0,
                minutes: bool = False, bits: int | None = None, member: int | None = None
                ) -> bytes:
        """Encode ``values`` as ``product`` at step ``end`` (a statistic over ``start``-``end``
        for accumulations, means and maxima), in hours, or in minutes if ``minutes``; in an
        ensemble's run as its ``member`` (perturbationNumber, 0 the control).

        The product's template handle is reused: only the step keys and the values change
        from one message to the next, which keeps the per-message cost near the packing."""
        h = self._template(product, minutes)
        if self._statistical[(product.short_name, product.param, product.type_of_level,
                              product.level, minutes)]:
            eccodes.codes_set_long(h, "startStep", start)
            eccodes.codes_set_long(h, "endStep", end)
        else:
            eccodes.codes_set_long(h, "forecastTime", end)
        if self.ensemble:
            if member is None:
                raise ValueError(f"{product.param}: an ensemble's message needs its member")
            control = member == 0
            e = self.ensemble
            eccodes.codes_set_long(h, "perturbationNumber", member)
            eccodes.codes_set_long(h, "typeOfEnsembleForecast",
                                   e.control_type if control else e.perturbed_type)
            eccodes.codes_set_long(h, "typeOfProcessedData",
                                   e.control_data if control else e.perturbed_data)
            if self.kind == "ecmwf":  # the MARS type of ECMWF's local section
                eccodes.codes_set_string(h, "marsType", "cf" if control else "pf")
        # A constant field is packed with 0 bits, after which ecCodes would pick 24: reset.
        eccodes.codes_set_long(h, "bitsPerValue", bits or self.bits)
        eccodes.codes_set_values(h, np.ascontiguousarray(values, dtype=np.float64).ravel())
        return eccodes.codes_get_message(h)


class Writer:
    """Writes files under the run directory (temporary name, then rename), optionally
    bz2-compressing them, on a small thread pool (bz2 and file I/O release the GIL)."""

    def __init__(self, root: Path):
        self.root = root
        self.files: list[Path] = []
        self.bytes = 0
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sample-write")
        self._pending: list[Future] = []
        self._dirs: set[Path] = set()

    def write(self, rel: str, data: bytes, *, compress: bool = False, data_file: bool = True):
        path = self.root / rel
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        if data_file:
            self.files.append(path)
        self._pending.append(self._pool.submit(self._write, path, data, compress))
        if len(self._pending) > 64:
            self._drain(32)

    def _write(self, path: Path, data: bytes, compress: bool) -> int:
        if compress:
            data = bz2.compress(data, compresslevel=1)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return len(data)

    def _drain(self, keep: int = 0) -> None:
        while len(self._pending) > keep:
            self.bytes += self._pending.pop(0).result()

    def close(self) -> None:
        try:
            self._drain()
        finally:
            self._pool.shutdown(wait=True)

