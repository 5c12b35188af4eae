"""Wind-farm power against known truth: a hand-computed curve at a known wind and density,
windpowerlib's own density correction, the cut-out and its hysteresis, and the quantiles of the
members' power (not the power of the wind's quantiles)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from windpowerlib.power_output import power_curve_density_correction

import pointcast
from pointcast import physics, turbines
from pointcast.ensemble import QUANTILES
from pointcast.power import wind
from pointcast.products.power import quantiles_kw

CURVE = """\
# rated_power_kw: 2000
# cut_out_m_s: 25
wind_speed_m_s,power_kw
4,100
8,900
12,2000
20,2000
"""


@pytest.fixture
def curve(tmp_path: Path) -> turbines.PowerCurve:
    path = tmp_path / "curve.csv"
    path.write_text(CURVE, encoding="utf-8")
    return turbines.read_curve(path)


def test_known_curve_at_standard_density(curve):
    # at 1.225 kg/m3 the curve is read as tabulated: linear between rows, 0 below the first
    w = np.array([0.0, 3.99, 4.0, 6.0, 10.0, 12.0, 22.0, 25.0, 25.01])
    expected = [0.0, 0.0, 100.0, 500.0, 1450.0, 2000.0, 2000.0, 2000.0, 0.0]
    np.testing.assert_allclose(wind.turbine_power_kw(w, 1.225, curve), expected, atol=1e-9)


def test_known_curve_at_low_density_by_hand(curve):
    # rho = 1.0: the rows at 4 and 8 m/s move to 4 * 1.225**(1/3) and 8 * 1.225**(1/3 + 0.5/15)
    # (the exponent is 1/3 up to 7.5 m/s and rises by 1/15 per m/s to 2/3 at 12.5 m/s); the
    # power at 6 m/s is read between them.
    x0 = 4.0 * 1.225 ** (1.0 / 3.0)
    x1 = 8.0 * 1.225 ** (1.0 / 3.0 + 0.5 / 15.0)
    assert (round(x0, 4), round(x1, 4)) == (4.2799, 8.618)
    expected = 100.0 + 800.0 * (6.0 - x0) / (x1 - x0)
    assert round(expected, 2) == 417.2  # 17 % below the 500 kW at standard density
    assert wind.turbine_power_kw(6.0, 1.0, curve) == pytest.approx(expected, rel=1e-12)
    # denser air moves the curve the other way: more power at the same wind
    assert wind.turbine_power_kw(6.0, 1.3, curve) > 500.0


@pytest.fixture
def offline(monkeypatch):
    """windpowerlib can download a turbine library from the OpenEnergy database (requests.get):
    the comparison must never reach it."""
    import requests

    def refuse(*args, **kwargs):
        raise AssertionError(f"network call from the wind-power tests: {args}")

    monkeypatch.setattr(requests, "get", refuse)
    monkeypatch.setattr(requests.Session, "request", refuse)


def test_pointcast_never_imports_windpowerlib():
    # a test dependency only: the reference the vectorised correction is checked against
    for path in Path(pointcast.__file__).parent.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert not [ln for ln in lines if ln.lstrip().startswith(("import windpowerlib", "from windpowerlib"))], path


def test_equals_windpowerlib_density_correction(offline):
    rng = np.random.default_rng(7)
    for name in turbines.library_names():
        c = turbines.library_curve(name)
        w = np.r_[rng.uniform(0.0, 30.0, 600), c.wind_speed_m_s, 7.5, 12.5]
        rho = np.r_[rng.uniform(0.95, 1.40, 600), np.full(len(c.wind_speed_m_s) + 2, 1.1)]
        reference = power_curve_density_correction(w, c.wind_speed_m_s, c.power_kw, rho)
        ours = wind.turbine_power_kw(w.reshape(-1, 1), rho.reshape(-1, 1), c).ravel()  # any shape
        # the same wherever windpowerlib's moved curve is defined and the turbine runs
        defined = (w < c.wind_speed_m_s[-1] * (1.225 / rho) ** (2.0 / 3.0)) & (w <= c.cut_out_m_s)
        assert defined.sum() > 300
        np.testing.assert_allclose(ours[defined], reference[defined], rtol=1e-10, atol=1e-9, err_msg=name)
        # outside it: stopped above the cut-out, as windpowerlib past its moved last row
        assert (ours[w > c.cut_out_m_s] == 0).all()


def test_hub_air_density_moist_ideal_gas():
    # 15 degC, 1013.25 hPa, dry (dewpoint far below): the ISA sea-level density, 1.225 kg/m3
    rho = wind.hub_air_density(101325.0, 288.15, 200.0, 288.15, 0.0)
    assert rho == pytest.approx(101325.0 / (287.047 * 288.15), rel=1e-5) and rho == pytest.approx(1.225, abs=1e-3)
    # humid air is lighter; 100 m up with the ISA lapse rate the pressure falls by about 1.2 %
    assert wind.hub_air_density(101325.0, 288.15, 288.0, 288.15, 0.0) < rho
    up = wind.hub_air_density(101325.0, 288.15, 200.0, 288.15 - 0.65, 100.0)
    p100 = physics.pressure_at_height(101325.0, 288.15, 288.15 - 0.65, 100.0)
    assert up == pytest.approx(p100 / (287.047 * (288.15 - 0.65)), rel=1e-5) and 0.987 < up / rho < 0.991


def test_cut_out_hysteresis_along_time():
    w = np.array([[20.0, 26.0, 24.0, 22.0, 19.0, 21.0, 26.0, 10.0]])
    assert wind.running(w, 25.0).tolist() == [[True, False, True, True, True, True, False, True]]
    # with a restart speed of 20 m/s the farm stays down after the cut-out until the wind drops below it
    assert wind.running(w, 25.0, 20.0).tolist() == [[True, False, False, False, True, True, False, True]]
    # along another axis (time first, two members)
    both = np.stack([w[0], np.full(8, 10.0)], axis=1)
    assert wind.running(both, 25.0, 20.0, axis=0)[:, 0].tolist() == [True, False, False, False, True, True, False, True]
    assert wind.running(both, 25.0, 20.0, axis=0)[:, 1].all()


def test_farm_power_turbines_and_efficiency(curve):
    w = np.array([[6.0, 15.0, 24.0, 26.0, 24.0, np.nan]])
    farm = wind.farm_power_kw(w, 1.225, curve, turbines=10, efficiency=0.85, restart_m_s=22.0)
    np.testing.assert_allclose(farm[0, :5], [4250.0, 17000.0, 17000.0, 0.0, 0.0])
    assert np.isnan(farm[0, 5])


def _members_kw(member_wind: np.ndarray, curve, density=1.225) -> np.ndarray:
    """(site, time, member) farm power of two turbines, as the build computes each site's
    members (time along axis 0 of a site's (time, member) wind, for the hysteresis)."""
    return np.stack([wind.farm_power_kw(site, density, curve, turbines=2, efficiency=1.0, axis=0)
                     for site in member_wind])


def test_quantiles_of_member_power_not_power_of_wind_quantiles(curve):
    """The product's quantiles (`products.power.quantiles_kw`) of the members' power: 51
    members from 15 to 35 m/s around the cut-out (25 m/s), half at rated power, half
    standing; a second site in light wind; three steps."""
    members = np.linspace(15.0, 35.0, 51)
    member_wind = np.stack([np.tile(members, (3, 1)), np.full((3, 51), 6.0)])  # (site, time, member)
    q, used = quantiles_kw((("ens", _members_kw(member_wind, curve)),), 1)
    assert q.shape == (2, 3, len(QUANTILES)) and used == ["ens"]
    assert q[0, :, 0].tolist() == [0.0] * 3  # P10
    assert q[0, :, -1].tolist() == [4000.0] * 3  # P90
    assert q[1].tolist() == [[1000.0] * 5] * 3  # 500 kW a turbine at 6 m/s
    # the wind's P10 (17 m/s) makes full power and its P90 (33 m/s) none: the other way round
    wind_q = np.quantile(members, [0.1, 0.9])
    assert wind.turbine_power_kw(wind_q, 1.225, curve).tolist() == [2000.0, 0.0]
    # an interval's quantiles are those of its steps' mean power, not the mean of quantiles
    q2, _ = quantiles_kw((("ens", _members_kw(member_wind[:, :2], curve)),), 2)
    assert q2.shape == (2, 1, len(QUANTILES)) and q2[0, 0, 0] == 0.0


def test_a_missing_member_leaves_no_quantiles_and_the_next_ensemble_fills_them(curve):
    member_wind = np.stack([np.full((2, 3), 10.0)])
    gappy = _members_kw(member_wind, curve)
    gappy[0, 1, 2] = np.nan  # one member missing at the second step
    q, used = quantiles_kw((("icon-eu-eps", gappy),), 1)
    assert np.isnan(q[0, 1]).all() and np.isfinite(q[0, 0]).all() and used == ["icon-eu-eps"]
    q, used = quantiles_kw((("icon-eu-eps", gappy), ("ens", _members_kw(member_wind, curve))), 1)
    assert np.isfinite(q).all() and used == ["icon-eu-eps", "ens"]


@pytest.mark.parametrize(("text", "line", "column", "reason"), [
    ("wind_speed,power\n3,1\n", 1, "header", "expected header wind_speed_m_s,power_kw"),
    ("# rated_power: 5\nwind_speed_m_s,power_kw\n3,1\n4,2\n", 1, "rated_power", "unknown metadata key"),
    ("wind_speed_m_s,power_kw\n3,1\n3,2\n", 3, "wind_speed_m_s", "wind speeds must increase"),
    ("wind_speed_m_s,power_kw\n3,1\n4,x\n", 3, "power_kw", "not a number"),
    ("wind_speed_m_s,power_kw\n3,1\n", 1, "row", "at least 2 rows"),
    ("# cut_out_m_s: 2\nwind_speed_m_s,power_kw\n3,1\n4,2\n", 1, "cut_out_m_s", "outside (3, 60]"),
    ("wind_speed_m_s,power_kw\n3,1\n90,2\n", 3, "wind_speed_m_s", "outside [0, 60]"),
])
def test_curve_file_errors_name_line_and_column(tmp_path, text, line, column, reason):
    path = tmp_path / "c.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(turbines.CurveFileError) as ei:
        turbines.read_curve(path)
    assert (ei.value.file, ei.value.line, ei.value.column) == (str(path), line, column)
    assert reason in ei.value.reason


def test_library_curves_with_provenance_and_licence():
    names = turbines.library_names()
    assert len(names) >= 7
    readme = (turbines.LIBRARY_DIR / "README.md").read_text(encoding="utf-8")
    licence = (turbines.LIBRARY_DIR / "LICENSE-NREL-turbine-models.txt").read_text(encoding="utf-8")
    assert "BSD 3-Clause" in licence and "Alliance for Sustainable Energy" in licence
    for name in names:
        c = turbines.library_curve(name)
        text = (turbines.LIBRARY_DIR / f"{name}.csv").read_text(encoding="utf-8")
        assert f"`{name}`" in readme and "# source: NREL turbine-models, turbine_models/data/" in text
        assert "# licence: BSD-3-Clause" in text
        assert c.name == name and c.power_kw.max() <= c.rated_power_kw and c.cut_out_m_s == 25.0
        # every curve reaches at least 45 % of rated power by 12 m/s, and none before 2.5 m/s
        assert wind.turbine_power_kw(12.0, 1.225, c) >= 0.45 * c.rated_power_kw
        assert wind.turbine_power_kw(2.5, 1.225, c) == 0.0
    with pytest.raises(KeyError, match="no turbine 'nope'"):
        turbines.library_curve("nope")
