"""Wind-turbine power curves: the bundled library and the CSV format a user adds to.

One format for both (README.md in this directory, docs/config.md "Sites"): ``# key: value``
metadata lines, then the header ``wind_speed_m_s,power_kw`` and one row per tabulated wind
speed. The library's curves are NREL turbine-models data (BSD-3-Clause, the licence beside
them); their README says which file and commit each came from.

A bad curve file raises :class:`CurveFileError` naming its file, line and column, which the
sites loader (`pointcast.config`) reports as a configuration error.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CurveFileError", "PowerCurve", "finite", "LIBRARY_DIR", "CURVE_COLUMNS", "library_names", "library_curve",
           "read_curve"]

LIBRARY_DIR = Path(__file__).resolve().parent
CURVE_COLUMNS = ("wind_speed_m_s", "power_kw")
# metadata keys a curve file may carry; rated power and cut-out are read, the rest are provenance
METADATA_KEYS = ("name", "description", "rated_power_kw", "rotor_diameter_m", "hub_height_m", "cut_out_m_s",
                 "note", "source", "licence")
MAX_WIND_SPEED_M_S = 60.0  # no turbine runs above this; a larger value is a unit mistake
_METADATA_RE = re.compile(r"#\s*([A-Za-z_]+)\s*:\s*(.*)")


class CurveFileError(ValueError):
    """A problem in a power-curve CSV; ``str(err)`` is ``"<file>:<line>: <column>: <reason>"``
    as a `pointcast.config.ConfigError`, which the sites loader turns it into."""

    def __init__(self, file: str, line: int, column: str, reason: str) -> None:
        self.file, self.line, self.column, self.reason = str(file), int(line), column, reason
        super().__init__(f"{self.file}:{self.line}: {column}: {reason}")

    def __reduce__(self):  # picklable, as ConfigError
        return (type(self), (self.file, self.line, self.column, self.reason))


@dataclass(frozen=True, eq=False)
class PowerCurve:
    """One turbine's electrical power against hub-height wind speed at 1.225 kg/m3.

    Zero below the first tabulated speed (cut-in) and above ``cut_out_m_s``; the last
    tabulated power between the last row and the cut-out; linear between rows."""

    name: str
    wind_speed_m_s: np.ndarray  # strictly increasing, >= 0
    power_kw: np.ndarray  # >= 0, at most rated_power_kw
    rated_power_kw: float
    cut_out_m_s: float
    source: str  # the library name or the file it was read from


def library_names() -> tuple[str, ...]:
    """The bundled curves' names (their files' stems), sorted."""
    return tuple(sorted(p.stem for p in LIBRARY_DIR.glob("*.csv")))


def library_curve(name: str) -> PowerCurve:
    """The bundled curve ``name``; KeyError naming the library's curves if there is none."""
    if name not in library_names():
        raise KeyError(f"no turbine {name!r} in the library (known: {', '.join(library_names())})")
    return read_curve(LIBRARY_DIR / f"{name}.csv", shown=name)


def read_curve(path: str | Path, shown: str | None = None) -> PowerCurve:
    """Read and check a power-curve CSV; ``shown`` is the file name errors give (default: path)."""
    shown = shown if shown is not None else str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise CurveFileError(shown, 1, "file", f"cannot read power-curve file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CurveFileError(shown, 1, "file", "not UTF-8 text") from None
    meta: dict[str, tuple[int, str]] = {}
    speeds: list[float] = []
    powers: list[float] = []
    header_line = 0
    raw_lines = text.splitlines()
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    try:
        for row in reader:
            line = reader.line_num
            cells = [c.strip() for c in row]
            if not any(cells):
                continue
            if cells[0].startswith("#"):
                m = _METADATA_RE.fullmatch(raw_lines[line - 1].strip())
                if m and not header_line:
                    key = m.group(1)
                    if key not in METADATA_KEYS:
                        raise CurveFileError(shown, line, key, f"unknown metadata key (known: {', '.join(METADATA_KEYS)})")
                    meta[key] = (line, m.group(2).strip())
                continue
            if not header_line:
                if tuple(cells) != CURVE_COLUMNS:
                    raise CurveFileError(shown, line, "header", f"expected header {','.join(CURVE_COLUMNS)}, "
                                                               f"got {','.join(cells)}")
                header_line = line
                continue
            if len(cells) != 2:
                raise CurveFileError(shown, line, "row", f"expected 2 fields ({','.join(CURVE_COLUMNS)}), got {len(cells)}")
            v = finite(shown, line, "wind_speed_m_s", cells[0])
            p = finite(shown, line, "power_kw", cells[1])
            if not 0.0 <= v <= MAX_WIND_SPEED_M_S:
                raise CurveFileError(shown, line, "wind_speed_m_s", f"wind speed {v:g} m/s outside [0, {MAX_WIND_SPEED_M_S:g}]")
            if speeds and v <= speeds[-1]:
                raise CurveFileError(shown, line, "wind_speed_m_s",
                                     f"wind speeds must increase ({v:g} after {speeds[-1]:g} m/s)")
            if p < 0.0:
                raise CurveFileError(shown, line, "power_kw", f"negative power {p:g} kW")
            speeds.append(v)
            powers.append(p)
    except csv.Error as exc:
        raise CurveFileError(shown, reader.line_num or 1, "row", f"malformed CSV: {exc}") from None
    if not header_line:
        raise CurveFileError(shown, 1, "header", f"no header (expected {','.join(CURVE_COLUMNS)})")
    if len(speeds) < 2:
        raise CurveFileError(shown, header_line, "row", "a power curve needs at least 2 rows")
    if max(powers) <= 0.0:
        raise CurveFileError(shown, header_line, "power_kw", "the curve is zero everywhere")
    rated = _meta_number(shown, meta, "rated_power_kw", max(powers))
    if rated <= 0.0:
        raise CurveFileError(shown, meta["rated_power_kw"][0], "rated_power_kw", f"rated power must be > 0, got {rated:g}")
    cut_out = _meta_number(shown, meta, "cut_out_m_s", speeds[-1])
    if not speeds[0] < cut_out <= MAX_WIND_SPEED_M_S:
        raise CurveFileError(shown, meta["cut_out_m_s"][0], "cut_out_m_s",
                             f"cut-out {cut_out:g} m/s outside ({speeds[0]:g}, {MAX_WIND_SPEED_M_S:g}] m/s")
    name = meta["name"][1] if "name" in meta else Path(path).stem
    # Tabulation noise can put a row a little above rated (NREL 5 MW: 5000.92 kW at 11.4 m/s):
    # clipped, so that a capacity factor never exceeds 1.
    return PowerCurve(name=name, wind_speed_m_s=np.array(speeds), power_kw=np.minimum(np.array(powers), rated),
                      rated_power_kw=rated, cut_out_m_s=cut_out, source=shown)


def finite(file: str, line: int, column: str, text: str, error: type[Exception] = CurveFileError) -> float:
    """A CSV cell as a finite number, or ``error(file, line, column, reason)`` (the curve
    files' `CurveFileError`; the configuration's CSVs pass their `ConfigError`)."""
    try:
        v = float(text)
    except ValueError:
        raise error(file, line, column, f"not a number: {text!r}") from None
    if not math.isfinite(v):
        raise error(file, line, column, f"not a finite number: {text!r}")
    return v


def _meta_number(file: str, meta: dict[str, tuple[int, str]], key: str, default: float) -> float:
    if key not in meta:
        return default
    line, text = meta[key]
    return finite(file, line, key, text)
