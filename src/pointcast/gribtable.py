"""A model's encoding table: which GRIB messages make which canonical variable, and how.

The models write their tables in these rows (``pointcast.sources``), the decoder reads runs by
them (``pointcast.ingest``) and the sample source encodes by them (``pointcast.sample``): a leaf
module, so that the decoder need not import the models nor the models the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum


class Processing(StrEnum):
    """How the raw GRIB value at a step relates to the canonical interval value."""

    INSTANT = "instant"  # value valid at the step
    # Accumulated / averaged over the message's window (startStep, endStep]: from the run start
    # (IFS tp, ICON TOT_PREC, ICON ASWDIR_S) or from the last reset (GFS, every 6 hours).
    ACCUM_SINCE_START = "accum_since_start"
    AVG_SINCE_START = "avg_since_start"
    INTERVAL = "interval"  # already the value of the interval ending at the step (max gust)
    CONSTANT = "constant"  # time-invariant field, published at step 0 (HSURF, orography)


@dataclass(frozen=True)
class Encoding:
    """One way an upstream encodes a row's field, as ecCodes reads it from the message: the
    parameter and its units. The decoder checks every message a row names against the row's
    encodings and refuses the field when none fits (``ingest.judge``)."""

    paramId: int  # ecCodes' paramId (0 where ecCodes names nothing: JMA's TCDC and APCP)
    units: str  # ecCodes' ``units`` key
    # "discipline/category/number" (GRIB2) or "table/indicator" (GRIB1), checked when given:
    # the parameter's identity where the paramId is 0.
    parameter: str | None = None
    scale: float = 1.0  # raw in this encoding x scale = raw in the row's first encoding


@dataclass(frozen=True)
class GribField:
    """One row of a model's encoding table: a GRIB message kind -> a canonical variable."""

    var: str  # canonical name in the catalogue
    shortName: str  # ecCodes shortName as decoded (DWD local names included)
    typeOfLevel: str
    # None: a single-level field; RUN_LEVELS: the levels each run carries (ICON's model levels,
    # chosen from the run's own HHL, sources/icon.py), whatever their numbers.
    levels: tuple[int, ...] | None = None
    processing: Processing = Processing.INSTANT
    scale: float = 1.0  # canonical = raw * scale + offset (after de-accumulation)
    offset: float = 0.0
    per_second: bool = False  # divide the de-accumulated amount by the interval (J m-2 -> W m-2)
    fine: bool = False  # published on the model's fine (sub-hourly) steps too
    param: str | None = None  # upstream parameter name where it differs (DWD file names)
    edition: int | None = None  # GRIB edition this encoding belongs to (None: any)
    # The products can go without it: a run whose upstream lacks the field is used without it.
    optional: bool = False

    # What the message must be (parameter, units), the first the one ``scale``/``offset``
    # convert from; more than one where an upstream has used several (IFS tcc in % or 0-1).
    # Empty: not checked.
    encodings: tuple[Encoding, ...] = ()


# ``GribField.levels`` of a row whose levels each run decides.
RUN_LEVELS: tuple[int, ...] = ()


# DWD's cell-centre parameters of an unstructured (ICON native) grid, as its trees name them,
# and the shortName ecCodes decodes them as: coordinates, not rows of a table.
CELL_CENTRES = {"CLAT": "tlat", "CLON": "tlon"}


@dataclass(frozen=True)
class Need:
    """The messages of a model run some product uses (`pointcast.need`): each row of the
    model's table with the last step (minutes from the run's start) it is used at. A source
    fetches, and decode reads, only these; a constant row (orography) is its step 0."""

    rows: tuple[tuple[GribField, int], ...]

    def wants(self, row: GribField, minutes: int) -> bool:
        return any(r == row and minutes <= last for r, last in self.rows)

    def rows_at(self, minutes: int) -> tuple[GribField, ...]:
        """The rows used at the step ``minutes`` after the run's start."""
        return tuple(r for r, last in self.rows if minutes <= last)

    @property
    def last_minutes(self) -> int:
        return max((last for _, last in self.rows), default=-1)

    def steps(self, steps: tuple[timedelta, ...]) -> tuple[timedelta, ...]:
        """The steps of ``steps`` some row is used at."""
        return tuple(s for s in steps if s <= timedelta(minutes=self.last_minutes))
