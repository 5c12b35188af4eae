"""ecCodes and pointcast imported in either order: a script that decodes a GRIB file and projects
a point exits with status 0 and warns of nothing (pointcast/__init__.py says why it could not)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from test_decode import write

# What the script prints: the file's messages as the header pass sees them, and the natural
# origin of EPSG:3035 (52N 10E), which the projection defines as its false easting and northing.
SCRIPT = """
import sys
from pathlib import Path
{imports}
from pointcast.grids.laea import lonlat_to_3035
print([(m.shortName, m.typeOfLevel, m.stepType, m.end_minutes) for m in ingest.index_file(Path(sys.argv[1]))])
print(lonlat_to_3035(10.0, 52.0))
"""
ORDERS = {
    "eccodes-first": "import eccodes\nfrom pointcast import ingest",
    "pointcast-first": "from pointcast import ingest\nimport eccodes",
}


@pytest.mark.parametrize("order", ORDERS)
def test_either_import_order_decodes_and_exits_cleanly(tmp_path: Path, order: str) -> None:
    grib = write(tmp_path / "t2m.grib2", [{"shortName": "2t", "stepType": "instant", "step": 6}])
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(imports=ORDERS[order]), str(grib)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # pyproj's "unable to set PROJ database path" included
    assert done.stdout.splitlines() == ["[('2t', 'heightAboveGround', 'instant', 360)]",
                                        "(4321000.0, 3210000.0)"]
