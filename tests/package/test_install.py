"""`pip install .` works without a C compiler: the compiled rendering steps are optional, and
the package then renders with their numpy twin, to the same bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A product-like rendering: numbers at three precisions with gaps, labels, a point's file.
RENDER = """
import hashlib
import numpy as np
from pointcast.products import base
rng = np.random.default_rng(7)
values = rng.normal(5, 20, (200, 12))
values[rng.random(values.shape) < 0.03] = np.nan
labels = np.where(values > 5, "Rain", "Clear sky").astype(object)
rows = base.Records({"datetime": base.strings([f"t{i}" for i in range(200)]),
                     "temp": base.numbers(values, 1), "pres": base.numbers(values * 40 + 900, 2),
                     "code": base.numbers(values * 10, None), "weather": base.strings(labels)})
digest = hashlib.sha256(b"".join(rows.at(j) for j in range(12))).hexdigest()
print(base._render.__name__, digest)
"""


def test_the_package_installs_and_renders_the_same_bytes_without_a_compiler(tmp_path):
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false"}  # any compile fails
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, env=env, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("pointcast-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pointcast/_render_numpy.py" in names
    assert not [n for n in names if n.endswith(".so")]  # nothing was compiled
    # the turbine library ships with its provenance and its source's licence (pyproject package-data)
    assert {"pointcast/turbines/README.md", "pointcast/turbines/LICENSE-NREL-turbine-models.txt",
            "pointcast/turbines/nrel-5mw-126.csv", "pointcast/power/pv.py"} <= set(names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)

    # -S: no site processing, so the editable install of the checkout (a finder that maps
    # every pointcast module to src/) is not in the way; the dependencies come from PYTHONPATH.
    deps = os.pathsep.join(p for p in sys.path if p.endswith("site-packages"))

    def render(package_root: str) -> list[str]:
        out = subprocess.run([sys.executable, "-S", "-c", RENDER], check=True, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": f"{package_root}{os.pathsep}{deps}"},
                             timeout=120)
        return out.stdout.split()

    module, digest = render(str(site))
    assert module == "pointcast._render_numpy"
    compiled_module, compiled_digest = render(str(ROOT / "src"))
    assert compiled_module == "pointcast._render"
    assert digest == compiled_digest
