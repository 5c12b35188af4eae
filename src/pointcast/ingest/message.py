"""What a GRIB message is: where it lies, what ecCodes names it, its run, its times and its grid.

A ``Message`` is one field of a file (a multi-field message yields one per field), as the
header pass (``scan``) reads it; nothing here reads values. Two kinds of horizontal grid are
known: regular lat/lon (``GridKey``: dims ``lat``, ``lon``) and unstructured grids
(``CellGridKey``: GRIB2 template 3.101, DWD's native ICON grids, dim ``cell`` with the
coordinates ``clat``/``clon``). An unstructured grid is named by its ``uuidOfHGrid``; its cell
centres come from the CLAT/CLON messages among a run's files and are kept here per UUID for
the life of the process (``dataset`` stores them), so a run whose source already has them
cached need not carry them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from ..gribtable import CELL_CENTRES, GribField, Processing


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
# DWD's CLAT and CLON (discipline 0, category 191, numbers 1 and 2; ``gribtable.CELL_CENTRES``) as
# rows: never rows of a model's table (they are coordinates, taken out before the rows are
# matched), but what an HTTP source asks a layout for to fetch a grid's centres
# (``sources/remote/``).
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
    # An ensemble member's message (product templates 4.1, 4.11 ...): its perturbationNumber
    # (0 the control), typeOfEnsembleForecast (code table 4.6: 0/1 control, 2/3 perturbed)
    # and numberOfForecastsInEnsemble. None for a deterministic message.
    member: int | None = None
    ensemble_type: int | None = None
    ensemble_size: int | None = None

    @property
    def where(self) -> str:
        """The file and message, as a refusal or an error names them."""
        return f"{self.path.name} message {self.number}" + (f".{self.field}" if self.parts else "")

