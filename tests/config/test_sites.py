"""The sites lists (wind farms and solar plants): values, defaults, and every rejection with
file:line: column, as the points lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from pointcast import turbines
from pointcast.config import (
    DEFAULT_FARM_EFFICIENCY,
    DEFAULT_PV_LOSSES_PCT,
    DEFAULT_PV_MOUNTING,
    DEFAULT_TEMP_COEFF_PCT,
    ConfigError,
    PVSite,
    WindSite,
    load_config,
    load_sites,
)
from test_config import BASE, expect_error, write

HEADER = ("id,name,lat,lon,kind,hub_height,turbine,turbines,capacity_mw,farm_efficiency,restart_wind,"
          "dc_kwp,ac_kw,tilt,azimuth,losses,mounting,temp_coeff\n")
WIND = "hornsea,Hornsea,53.885,1.791,wind,120,nrel-5mw-126,,1200,0.9,,,,,,,,\n"
OWN_CURVE = "local,Local farm,52.0,5.0,wind,90,curves/mine.csv,12,,,20,,,,,,,\n"
PV = "solar,Solar park,48.1,11.6,pv,,,,,,,5000,4000,25,180,,,\n"
CURVE = """\
# name: mine
# rated_power_kw: 2000
# cut_out_m_s: 24
wind_speed_m_s,power_kw
3,0
4,100
8,900
12,2000
24,2000
"""


def sites_file(tmp_path: Path, *rows: str, curve: str = CURVE) -> Path:
    path = tmp_path / "sites.csv"
    path.write_text(HEADER + "".join(rows), encoding="utf-8")
    (tmp_path / "curves").mkdir(exist_ok=True)
    (tmp_path / "curves" / "mine.csv").write_text(curve, encoding="utf-8")
    return path


def expect_site_error(path: Path, line: int, column: str, reason: str, file: Path | None = None) -> None:
    with pytest.raises(ConfigError) as ei:
        load_sites(path)
    err = ei.value
    assert (err.file, err.line, err.key) == (str(file or path), line, column), str(err)
    assert reason in err.reason, f"{reason!r} not in {err.reason!r}"


def test_sites_values_and_defaults(tmp_path):
    wind, own, pv = load_sites(sites_file(tmp_path, WIND, OWN_CURVE, PV))
    assert isinstance(wind, WindSite) and isinstance(own, WindSite) and isinstance(pv, PVSite)
    assert wind.curve.name == "nrel-5mw-126" and wind.hub_height_m == 120
    assert wind.turbines == pytest.approx(240.0)  # 1200 MW of 5 MW turbines
    assert wind.capacity_kw == pytest.approx(1.2e6) and wind.efficiency == 0.9 and wind.restart_m_s is None
    assert own.curve.rated_power_kw == 2000 and own.curve.cut_out_m_s == 24 and own.turbines == 12
    assert own.efficiency == DEFAULT_FARM_EFFICIENCY and own.restart_m_s == 20
    assert own.curve.source == str(tmp_path / "curves" / "mine.csv")
    assert (pv.dc_kwp, pv.ac_kw, pv.tilt, pv.azimuth, pv.capacity_kw) == (5000, 4000, 25, 180, 4000)
    assert (pv.losses_pct, pv.mounting, pv.temp_coeff_pct) == (DEFAULT_PV_LOSSES_PCT, DEFAULT_PV_MOUNTING,
                                                                DEFAULT_TEMP_COEFF_PCT)


def test_pv_only_file_needs_no_wind_columns(tmp_path):
    path = tmp_path / "pv.csv"
    path.write_text("id,name,lat,lon,kind,dc_kwp,ac_kw,tilt,azimuth,mounting\n"
                    "roof,Roof,-33.9,151.2,pv,10,8,20,0,close_mount_glass_glass\n", encoding="utf-8")
    (site,) = load_sites(path)
    assert site.azimuth == 0 and site.mounting == "close_mount_glass_glass"  # north-facing, south of the equator


@pytest.mark.parametrize(("row", "column", "reason"), [
    ("a,A,48,11,pv,,,,,,,10,8,30,-10,,,\n", "azimuth", "negative azimuth -10: pvlib's convention"),
    ("a,A,48,11,pv,,,,,,,10,8,30,0,,,\n", "azimuth", "faces the north pole"),
    ("a,A,-33,151,pv,,,,,,,10,8,30,180,,,\n", "azimuth", "faces the south pole"),
    ("a,A,48,11,pv,,,,,,,10,8,30,360,,,\n", "azimuth", "outside [0, 360)"),
    ("a,A,48,11,pv,,,,,,,10,8,30,,,,\n", "azimuth", "required for a pv site"),
    ("a,A,48,11,pv,,,,,,,10,,30,180,,,\n", "ac_kw", "required"),
    ("a,A,48,11,pv,,,,,,,10,8,95,180,,,\n", "tilt", "95 outside [0, 90]"),
    ("a,A,48,11,pv,,,,,,,10,8,30,180,,roof,\n", "mounting", "unknown mounting 'roof'"),
    ("a,A,48,11,pv,,,,,,,10,8,30,180,,,0.4\n", "temp_coeff", "outside [-1, 0]"),
    ("a,A,48,11,pv,120,,,,,,10,8,30,180,,,\n", "hub_height", "is for wind sites"),
    ("a,A,48,11,wind,120,nrel-5mw-126,2,,,,10,,,,,,\n", "dc_kwp", "is for pv sites"),
    ("a,A,48,11,wind,120,vestas-v999,2,,,,,,,,,,\n", "turbine", "no turbine 'vestas-v999' in the library"),
    ("a,A,48,11,wind,120,nrel-5mw-126,2,10,,,,,,,,,\n", "turbines", "not both"),
    ("a,A,48,11,wind,120,nrel-5mw-126,,,,,,,,,,,\n", "turbines", "not neither"),
    ("a,A,48,11,wind,120,nrel-5mw-126,2.5,,,,,,,,,,\n", "turbines", "whole number"),
    ("a,A,48,11,wind,400,nrel-5mw-126,2,,,,,,,,,,\n", "hub_height", "400 outside [10, 300]"),
    ("a,A,48,11,wind,,nrel-5mw-126,2,,,,,,,,,,\n", "hub_height", "required"),
    ("a,A,48,11,wind,120,nrel-5mw-126,2,,0,,,,,,,,\n", "farm_efficiency", "0 outside (0, 1]"),
    ("a,A,48,11,wind,120,nrel-5mw-126,2,,,25,,,,,,,\n", "restart_wind", "below the turbine's cut-out"),
    ("a,A,48,11,solar,,,,,,,10,8,30,180,,,\n", "kind", "unknown kind 'solar'"),
])
def test_site_rejections_name_line_and_column(tmp_path, row, column, reason):
    expect_site_error(sites_file(tmp_path, WIND, row), 3, column, reason)


def test_bad_curve_file_error_names_the_curve_file(tmp_path):
    bad = CURVE.replace("8,900\n", "7,900\n8,-5\n")
    path = sites_file(tmp_path, OWN_CURVE, curve=bad)
    expect_site_error(path, 8, "power_kw", "negative power -5 kW", file=tmp_path / "curves" / "mine.csv")


def test_product_sites_key(tmp_path):
    sites_file(tmp_path, WIND, PV)
    toml = BASE + 'sites = "sites.csv"\n'
    product = load_config(write(tmp_path, toml)).products["eu-medium"]
    assert product.sites_file == tmp_path / "sites.csv"
    assert [s.id for s in product.sites] == ["hornsea", "solar"]
    assert load_config(write(tmp_path)).products["eu-medium"].sites == ()


def test_product_sites_outside_coverage(tmp_path):
    sites_file(tmp_path, WIND, "tokyo,Tokyo PV,35.68,139.77,pv,,,,,,,10,8,30,180,,,\n")
    expect_error(write(tmp_path, BASE + 'sites = "sites.csv"\n'), 3, "lat,lon",
                 "site 'tokyo' (35.68, 139.77) is outside the coverage of product eu-medium",
                 file=tmp_path / "sites.csv")
    # every site outside is reported, as every point outside is
    sites_file(tmp_path, "tokyo,Tokyo PV,35.68,139.77,pv,,,,,,,10,8,30,180,,,\n", WIND,
               "osaka,Osaka PV,34.69,135.50,pv,,,,,,,10,8,30,180,,,\n")
    err = expect_error(write(tmp_path, BASE + 'sites = "sites.csv"\n'), 2, "lat,lon", "site 'tokyo'",
                       file=tmp_path / "sites.csv")
    assert [(e.line, e.key) for e in err.others] == [(4, "lat,lon")] and "site 'osaka'" in err.others[0].reason


def test_product_sites_file_missing(tmp_path):
    toml = BASE + 'sites = "nowhere.csv"\n'
    expect_error(write(tmp_path, toml), toml.count("\n"), "products.eu-medium.sites", "sites file not found")


def test_library_names_are_the_turbine_column_values():
    assert "iec-class-2-composite" in turbines.library_names()


def test_a_site_id_is_one_site_of_the_whole_configuration(tmp_path):
    """Power files are named by site id: the same id under two products is refused at the second."""
    sites_file(tmp_path, WIND, PV)
    toml = (BASE + 'sites = "sites.csv"\n'
            + '\n[products.eu-short]\npoints = "points.csv"\nmodels = ["ifs"]\nhorizon_hours = 72\nsites = "sites.csv"\n')
    expect_error(write(tmp_path, toml), 2, "id", "site id 'hornsea' is a site of product eu-medium already",
                 file=tmp_path / "sites.csv")


def test_shipped_sites_are_wind_farms_and_solar_plants_in_europe_and_japan():
    from test_config import SHIPPED

    cfg = load_config(SHIPPED)
    kinds = {pid: sorted({type(s).__name__ for s in pc.sites}) for pid, pc in cfg.products.items() if pc.sites}
    assert kinds == {"eu-wind": ["PVSite", "WindSite"], "japan": ["PVSite"], "global": ["PVSite", "WindSite"]}
    windpack = {p.id: p.hub_heights for p in cfg.products["eu-wind"].points}
    hornsea = next(s for s in cfg.products["eu-wind"].sites if s.id == "hornsea-1")
    assert isinstance(hornsea, WindSite) and hornsea.hub_height_m in windpack["hornsea-1"]
