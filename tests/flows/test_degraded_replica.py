"""`config/live.toml` against a replica of the real upstream trees that lack what upstreams
have dropped before: ECMWF files with the long-standing surface parameters only (no visibility,
most-unstable CAPE, direct radiation, surface geopotential, pressure levels), an ICON-D2 tree
with snow every hour only, and ICON HHL without its top half level; and without the ensembles
(``ensembles`` taken out of the products: the truth test covers them, and their thousands of
files would double this test's time), so the probabilities are the neighbourhood ones. Every
product is published;
the elements computed from what is missing take the contract's missing value where no model
supplies it, the manifest says which, where and why, and everything else is the truth."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import replica
from conftest import _link
from mirror import Mirror
from test_truth_replica import compare_all, live_config, run_cycle, shared_replica

MISSING = -9999


def thin(tree: Path) -> dict[str, int]:
    """The replica as the changed upstreams publish it (module docstring)."""
    return {
        "ifs": replica.drop_ifs_fields(tree, {"vis", "mucape", "fdir", "z"}, {"pl"}),
        "snow": replica.drop_dwd_files(tree, "icon-d2", "SNOW_GSP", keep=lambda p: p.name.endswith("H00M.grib2")),
        "hhl": sum(replica.drop_dwd_files(tree, m, "HHL", keep=lambda p: "/lv1/1/" not in p.as_posix())
                   for m in ("icon-eu", "icon-d2")),
    }


def test_a_thinner_upstream_costs_only_the_elements_it_feeds(tmp_path, prefect_harness):
    tree = tmp_path / "tree"
    shutil.copytree(shared_replica()[0], tree, copy_function=_link)  # thin() replaces what it changes
    dropped = thin(tree)
    assert dropped["ifs"] > 1000 and dropped["snow"] == 144 and dropped["hhl"] == 2
    with Mirror(tree) as mirror:
        cfg = live_config(tmp_path / "config", mirror)
        # A replica is a complete copy, never written while read: a file it does not have is
        # not published, without the 3 minutes a live tree is given (`missing_minutes`).
        text = cfg.read_text().replace("[sources.dwd]\n", "[sources.dwd]\nmissing_minutes = 0\n")
        cfg.write_text("".join(line for line in text.splitlines(keepends=True)
                               if not line.startswith("ensembles = ")))
        done = run_cycle(cfg, tmp_path / "prefect")
    assert not isinstance(done, str), f"the cycle did not finish: {done}"
    assert done.returncode == 0, f"the cycle failed:\n{done.stdout[-6000:]}"
    root = tmp_path / "output" / "live"
    run_id = os.readlink(root / "current").rsplit("/", 1)[-1]
    m = json.loads((root / "runs" / run_id / "manifest.json").read_text())

    # Every model is used and every product built from this cycle's runs.
    assert m["dropped"] == {} and m["absent"] == {}
    assert sorted(m["products"]) == ["eu-medium", "eu-short", "eu-wind", "global", "japan"]
    assert not any("carried_from" in p for p in m["products"].values())
    assert set(m["models"]["ifs"]["lacking"]) == {"cape_mu", "fdir", "orog", "t_pl", "u_pl", "v_pl", "vis", "z_pl"}
    notes = " ".join(m["source_notes"]["icon-d2"])
    assert "the sub-hourly files of SNOW_CON, SNOW_GSP are not all published" in notes, notes

    # What is degraded, where and why: visibility everywhere (DWD's v1 tree has none either),
    # direct radiation beyond ICON-EU's 120 h, the weather type without fog or CAPE.
    degraded = m["degraded"]
    assert set(degraded) == {"eu-medium", "eu-short"}, degraded
    medium = degraded["eu-medium"]
    assert set(medium) == {"visibility", "solar_radiation_dir", "solar_radiation_diff", "weather_type"}, medium
    assert medium["visibility"]["lead_times"] == [[0.0, 336.0]]
    why = medium["visibility"]["reason"]
    assert why.startswith("no model supplies its inputs") and "vis: not in the run of" in why and "ifs" in why
    assert medium["solar_radiation_dir"]["lead_times"] == [[120.0, 336.0]]
    assert "fdir: not in the run of ifs" in medium["solar_radiation_dir"]["reason"]
    assert "cape_mu" in medium["weather_type"]["reason"]
    assert set(degraded["eu-short"]) == {"visibility", "weather_type"}

    # The published answers: the contract's missing value exactly there, nothing else missing.
    answer = json.loads((root / "runs" / run_id / "json" / "eu-medium" / "1H" / "paris.json").read_text())
    data = answer["data"]
    assert len(data) == 336 and all(e["visibility"] == MISSING for e in data)
    assert all(e["solar_radiation_dir"] != MISSING for e in data[:120])
    assert all(e["solar_radiation_dir"] == MISSING for e in data[120:])
    kept = [k for k in data[0] if k not in ("datetime", "weather_type", "visibility",
                                            "solar_radiation_dir", "solar_radiation_diff")]
    assert all(e[k] != MISSING for e in data for k in kept)

    # Against the truth: only the degraded elements (and ICON-D2's snow at 15 and 30 minutes,
    # now spread evenly over each hour) are off.
    rep = compare_all(root)
    allowed = {(op, el) for op in ("medium-range", "short-range", "medium-range 15min", "short-range 15min",
                                   "medium-range 30min", "short-range 30min")
               for el in ("visibility", "solar_radiation_dir", "solar_radiation_diff", "weather_type")}
    allowed |= {(op, "snowfall") for op in ("medium-range 15min", "short-range 15min",
                                            "medium-range 30min", "short-range 30min")}
    assert set(rep.bad) <= allowed, "elements off the truth:\n" + rep.summary()
