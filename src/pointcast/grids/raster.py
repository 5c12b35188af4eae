"""Coverage rasters: a coverage stored as a boolean lat/lon raster over a box, built once per
process on first use and cached on disk when a cache directory is configured.
"""

from __future__ import annotations

import abc
import hashlib
import importlib.metadata
import logging
import math
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from .base import Coverage, _as_float_arrays

log = logging.getLogger(__name__)

_cache_dir: Path | None = None
_cache_dir_explicit = False


def set_cache_dir(path: str | os.PathLike | None, *, if_unset: bool = False) -> None:
    """Directory for cached coverage rasters (``None``: memory only).

    With ``if_unset=True`` the call only takes effect when neither an earlier explicit call nor
    the ``POINTCAST_CACHE_DIR`` environment variable chose a directory (``config.load_config``
    uses this to default to ``[output] cache`` or `user_cache_dir`).
    """
    global _cache_dir, _cache_dir_explicit
    if if_unset and (_cache_dir_explicit or os.environ.get("POINTCAST_CACHE_DIR")):
        return
    _cache_dir = None if path is None else Path(path)
    _cache_dir_explicit = not if_unset


def user_cache_dir() -> Path:
    """The user's cache directory for pointcast: ``$XDG_CACHE_HOME/pointcast``, by default
    ``~/.cache/pointcast`` (the XDG Base Directory specification)."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base and os.path.isabs(base) else Path.home() / ".cache") / "pointcast"


def get_cache_dir() -> Path | None:
    if _cache_dir_explicit:
        return _cache_dir
    env = os.environ.get("POINTCAST_CACHE_DIR")
    if env:
        return Path(env)
    return _cache_dir


class RasterCoverage(Coverage):
    """A coverage stored as a boolean lat/lon raster over a box, looked up point by point.

    The box is ``south..north`` x ``west..east`` (edges included); nothing outside it is covered.
    Row ``k`` of the raster covers latitudes ``(north - (k+1) res, north - k res]``, column ``l``
    longitudes ``[west + l res, west + (l+1) res)``; the box's far edges fall into the last
    row/column. Subclasses say how the raster is built (``build``) and what identifies it
    (``_cache_params``); the raster is built once per process on first use and, when a cache
    directory is configured (see ``set_cache_dir``), kept on disk as
    ``coverage-<cache_name>-<hash>.npy``.
    """

    cache_name: str = "raster"

    def __init__(self, *, west: float, south: float, east: float, north: float, res_deg: float) -> None:
        self.west, self.south, self.east, self.north = west, south, east, north
        self.res_deg = res_deg
        self.nrow = round((north - south) / res_deg)
        self.ncol = round((east - west) / res_deg)
        self._raster: np.ndarray | None = None
        self._lock = threading.Lock()

    # -- public -----------------------------------------------------------------------------

    @property
    def raster(self) -> np.ndarray:
        """The boolean coverage raster (nrow x ncol), built on first access."""
        r = self._raster
        if r is None:
            with self._lock:
                if self._raster is None:
                    self._raster = self._load_or_build()
                r = self._raster
        return r

    def covers_many(self, lats, lons) -> np.ndarray:
        lat, lon = _as_float_arrays(lats, lons)
        ok = (lat >= self.south) & (lat <= self.north) & (lon >= self.west) & (lon <= self.east)
        out = np.zeros(lat.shape, bool)
        if not ok.any():
            return out
        r = self.raster
        k = np.clip(np.floor((self.north - lat[ok]) / self.res_deg), 0, self.nrow - 1).astype(np.intp)
        l = np.clip(np.floor((lon[ok] - self.west) / self.res_deg), 0, self.ncol - 1).astype(np.intp)
        out[ok] = r[k, l]
        return out

    def covers(self, lat: float, lon: float) -> bool:
        try:
            lat = float(lat)
            lon = float(lon)
        except (TypeError, ValueError):
            return False
        if not (self.south <= lat <= self.north and self.west <= lon <= self.east):
            return False
        k = min(max(math.floor((self.north - lat) / self.res_deg), 0), self.nrow - 1)
        l = min(max(math.floor((lon - self.west) / self.res_deg), 0), self.ncol - 1)
        return bool(self.raster[k, l])

    # -- building ---------------------------------------------------------------------------

    @abc.abstractmethod
    def build(self) -> np.ndarray:
        """Compute the coverage raster (no caching)."""

    @abc.abstractmethod
    def _cache_params(self) -> tuple:
        """Everything the raster depends on (besides the land mask version)."""

    def _cache_key(self) -> str:
        try:
            glm = importlib.metadata.version("global-land-mask")
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover
            glm = "unknown"
        params = repr(self._cache_params() + (glm,))
        return hashlib.sha256(params.encode()).hexdigest()[:16]

    def _load_or_build(self) -> np.ndarray:
        cache_dir = get_cache_dir()
        path = cache_dir / f"coverage-{self.cache_name}-{self._cache_key()}.npy" if cache_dir else None
        if path is not None and path.is_file():
            try:
                r = np.load(path, allow_pickle=False)
                if r.shape == (self.nrow, self.ncol) and r.dtype == bool:
                    log.debug("loaded %s coverage raster from %s", self.cache_name, path)
                    return r
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable coverage cache %s: %s", path, exc)
        r = self.build()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".coverage-", suffix=".npy")
                with os.fdopen(fd, "wb") as fh:
                    np.save(fh, r, allow_pickle=False)
                os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache may be shared
                os.replace(tmp, path)
            except OSError as exc:
                log.warning("could not write coverage cache %s: %s", path, exc)
        return r
