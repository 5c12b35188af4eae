"""Interpolation, one job a module: ``horizontal`` (a model's grid -> the points, the stage's
entry ``extract``), ``vertical`` (source levels -> heights above ground, point elevations) and
``temporal`` (model steps -> the 15-minute axis -> a product's steps), and ``scratch`` (the
extracted series on disk until the build reads them).

The names the stages use are re-exported here, so ``interp.extract``, ``interp.resample`` and
the like stay where callers look for them.
"""

from . import horizontal, scratch, temporal, vertical
from .horizontal import (
                         EARTH_RADIUS_KM,
                         SAMPLINGS,
                         PointSet,
                         barycentric,
                         extract,
                         extract_blocks,
                         extract_members,
                         neighbourhood,
                         neighbourhood_cells,
                         sampling,
                         unit_vectors,
)
from .temporal import BASE_STEP, aggregate, base_axis, init_time, intervals, resample

__all__ = [
    "BASE_STEP", "EARTH_RADIUS_KM", "PointSet", "SAMPLINGS", "aggregate", "barycentric",
    "base_axis", "extract", "extract_blocks", "extract_members", "horizontal", "init_time", "intervals", "neighbourhood",
    "neighbourhood_cells", "resample", "sampling", "scratch", "temporal", "unit_vectors", "vertical",
]
