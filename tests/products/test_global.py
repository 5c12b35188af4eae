"""The global product (global/wx): grid and coverage, time zones, daily aggregation, serving."""

from __future__ import annotations

import json
import uuid
import zoneinfo
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import httpx
import numpy as np
import pytest
import xarray as xr

from pointcast import codes
from pointcast.grids import GLOBAL_5KM, grid_for
from pointcast.products.global_wx import MRF_DAYS, SRF_HOURS, STORED_DECIMALS, point_time_zone, read_hourly, render_zone
from pointcast.products.wx import HOURLY_DECIMALS, WHOLE_DAY
from test_cycle import run_dir, serving

SRF_FIELDS = ["date", "wx", "temp", "prec", "arpress", "wndspd", "wnddir", "rhum", "solrad"]
MRF_FIELDS = ["date", "wx", "maxtemp", "mintemp", "prec", "pop", "rhum", "solrad"]
SRF_CODES = {100, 200, 300, 400, 430, 500, 550, 650, 850, 950}
HOURS = 342


# --------------------------------------------------------------------------- grid and coverage


@pytest.mark.parametrize("lat, lon, covered", [
    (51.5074, -0.1278, True),  # London
    (-54.2811, -36.5092, True),  # Grytviken, South Georgia: land at 54S
    (-62.2, -58.9, False),  # King George Island: land, but south of 60S
    (-75.0, 0.0, False),  # Antarctica
    (-89.9, 45.0, False),
    (0.0, -30.0, False),  # open Atlantic
    (51.05, 1.6, False),  # the middle of the Strait of Dover
    (21.3069, -157.8583, True),  # Honolulu
])
def test_coverage_is_land_north_of_60s(lat, lon, covered):
    assert GLOBAL_5KM.covers(lat, lon) is covered
    assert bool(GLOBAL_5KM.covers_many([lat], [lon])[0]) is covered


def test_a_coastal_cell_is_covered_as_a_whole():
    # Dover's harbour: the cell holds the white cliffs and the sea in front of them.
    key = GLOBAL_5KM.cell_key(51.12, 1.33)
    clat, clon = GLOBAL_5KM.cell_centre(key)
    corners = [(clat + dy, clon + dx) for dy in (-0.0249, 0.0249) for dx in (-0.0249, 0.0249)]
    assert all(GLOBAL_5KM.covers(*c) for c in corners)
    assert all(GLOBAL_5KM.cell_key(*c) == key for c in corners)
    # one cell further out to sea (south-east) holds no land
    assert not GLOBAL_5KM.covers(clat - 0.10, clon + 0.15)


def test_cells_are_005_degree_and_keys_round_trip():
    assert grid_for("global") is GLOBAL_5KM
    key = GLOBAL_5KM.cell_key(35.6762, 139.6503)
    assert key == "R1086C6393"
    lat, lon = GLOBAL_5KM.cell_centre(key)
    assert lat == pytest.approx(35.675) and lon == pytest.approx(139.675)
    # edges: a cell holds its northern edge and its western edge; 180E is the last column
    assert GLOBAL_5KM.cell_key(50.0, 10.0) == GLOBAL_5KM.cell_key(49.99, 10.04)
    assert GLOBAL_5KM.cell_key(50.0, 10.0) != GLOBAL_5KM.cell_key(50.01, 10.0)
    assert GLOBAL_5KM.cell_key(0.0, 180.0) == GLOBAL_5KM.cell_key(-0.01, 179.99)
    keys = GLOBAL_5KM.cell_keys([35.6762, 50.0], [139.6503, 10.0])
    assert list(keys) == [key, GLOBAL_5KM.cell_key(50.0, 10.0)]
    for bad in ("R3600C0", "R1C7200", "E1N2", "R-1C2"):
        with pytest.raises(ValueError):
            GLOBAL_5KM.parse_key(bad)
    with pytest.raises(ValueError):
        GLOBAL_5KM.cell_key(91.0, 0.0)


@pytest.mark.parametrize("lat, lon, zone", [
    (51.5074, -0.1278, "Europe/London"), (27.7172, 85.3240, "Asia/Kathmandu"),
    (-34.9285, 138.6007, "Australia/Adelaide"), (47.5615, -52.7126, "America/St_Johns"),
    (-54.2811, -36.5092, "Atlantic/South_Georgia"),
])
def test_point_time_zone_from_timezonefinder(lat, lon, zone):
    assert point_time_zone(lat, lon) == zone


# --------------------------------------------------------------------------- zones and days


def _hourly(n: int = HOURS, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Published-precision hourly quantities of one point (time, 1), a day-night cycle."""
    rng = np.random.default_rng(seed)
    hour = np.arange(n)
    temp = np.round(10 + 8 * np.sin(2 * np.pi * (hour - 9) / 24) + rng.normal(0, 1, n), 1)
    return {k: v[:, None] for k, v in {
        "wx": rng.choice([100, 200, 300, 500, 650], n).astype(float),
        "temp": temp, "prec": np.round(rng.gamma(0.3, 1.0, n), 1),
        "arpress": np.round(1013 + rng.normal(0, 5, n), 1), "wndspd": np.round(rng.gamma(2, 2, n), 1),
        "wnddir": rng.integers(0, 17, n).astype(float), "rhum": rng.integers(30, 100, n).astype(float),
        "solrad": np.round(np.clip(500 * np.sin(2 * np.pi * (hour - 6) / 24), 0, None), 1),
        "pop": rng.integers(0, 101, n).astype(float),
    }.items()}


def _element(start: str, zone: str, hourly=None) -> dict:
    start64 = np.datetime64(start, "ns")
    return json.loads(render_zone([(1.0, 2.0)], start64, hourly or _hourly(), ZoneInfo(zone))[0])


def _hours_of(element: dict, hourly, start: str, zone: str) -> dict[str, list[int]]:
    """Indices of the hours (from `start`) that start on each local date of `zone`."""
    t0 = datetime.fromisoformat(start).replace(tzinfo=UTC)
    out: dict[str, list[int]] = {}
    for i in range(len(hourly["wx"])):
        out.setdefault((t0 + timedelta(hours=i)).astimezone(ZoneInfo(zone)).date().isoformat(), []).append(i)
    return out


def _shares(midnight: datetime, zone: str, start: str, n: int) -> np.ndarray:
    """The part of each hour (from `start`, UTC) inside the local day from `midnight`."""
    t0 = datetime.fromisoformat(start).replace(tzinfo=UTC)
    day0 = midnight.astimezone(UTC)
    day1 = datetime.combine(midnight.date() + timedelta(days=1), time(0), tzinfo=ZoneInfo(zone))
    out = np.zeros(n)
    for i in range(n):
        a, b = t0 + timedelta(hours=i), t0 + timedelta(hours=i + 1)
        out[i] = max((min(b, day1) - max(a, day0)) / timedelta(hours=1), 0.0)
    return out


def test_day_and_night_by_the_sun_at_the_middle_of_the_hour():
    """A clear dry hour is sunny (100) when the sun is up at its middle, clear (500) when not,
    whatever the sun does at its start: at dawn and dusk the two differ."""
    from pointcast import physics
    from pointcast.products.wx import hourly_fields

    lon = np.arange(0.0, 15.0, 2.0)  # the sun an hour apart at the first and the last
    lat = np.full_like(lon, 51.5)
    times = np.datetime64("2026-11-20T00:00", "ns") + np.arange(48) * np.timedelta64(1, "h")
    zero = np.zeros((48, len(lon)), np.float32)
    ds = xr.Dataset({"t2m": (("time", "point"), zero + 283.0), "d2m": (("time", "point"), zero + 280.0),
                     "wind_u": (("time", "point", "height"), zero[..., None] + 2.0),
                     "wind_v": (("time", "point", "height"), zero[..., None]),
                     "tp": (("time", "point"), zero), "sf": (("time", "point"), zero),
                     "tcc": (("time", "point"), zero), "msl": (("time", "point"), zero + 101300.0),
                     "ssrd": (("time", "point"), zero), "pop": (("time", "point"), zero)},
                    coords={"time": times, "point": np.arange(len(lon)), "height": [10.0]})
    wx = hourly_fields(ds, lat, lon)["wx"]
    start = physics.cos_solar_zenith(lat, lon, times) > 0
    middle = physics.cos_solar_zenith(lat, lon, times + np.timedelta64(30, "m")) > 0
    assert (start & ~middle).any() and (~start & middle).any()  # the sun sets, rises in a half hour
    assert (wx == np.where(middle, 100, 500)).all()


def test_a_day_off_the_hour_runs_from_its_midnight():
    """At +05:45 the hours start at quarter to: a local day's total and means take the hour
    a midnight cuts by its share (the 15-minute series spreads an hour's amount evenly), so the
    day runs 00:00-24:00, not 00:45-00:45. The totals add the hourly amounts to 0.001 mm, so
    that amounts published as 0.0 mm still count."""
    hourly = _hourly()
    hourly["prec"][:] = 0.0  # published: 0.04 mm rounded to 0.1 mm
    hourly["prec_fine"] = np.full_like(hourly["prec"], 0.04)
    hourly["prec"][24 * 3 + 18, 0] = hourly["prec_fine"][24 * 3 + 18, 0] = 1.0  # 23:45 on 23 Nov
    element = _element("2026-11-20T00:00", "Asia/Kathmandu", hourly)
    days = {e["date"][:10]: e["prec"] for e in element["mrf"]}
    assert days["2026-11-21"] == 1.0  # 24 hours of 0.04 mm (0.96), published to 0.1 mm
    assert days["2026-11-23"] == pytest.approx(1.2)  # 0.75 x 0.04 + 23 x 0.04 + 0.25 x 1.0
    assert days["2026-11-24"] == pytest.approx(1.7)  # 0.75 x 1.0 + 23 x 0.04 + 0.25 x 0.04


@pytest.mark.parametrize("start, zone, lengths", [
    # Europe leaves summer time on Sunday 25 October 2026: a local day of 25 hours
    ("2026-10-20T00:00", "Europe/Berlin", {"2026-10-25": 25}),
    # Sydney starts summer time on Sunday 4 October 2026: a local day of 23 hours
    ("2026-09-30T00:00", "Australia/Sydney", {"2026-10-04": 23}),
    # the US leaves summer time on Sunday 1 November 2026
    ("2026-10-29T06:00", "America/New_York", {"2026-11-01": 25}),
    # Adelaide (+09:30/+10:30) starts summer time on 4 October 2026
    ("2026-09-28T12:00", "Australia/Adelaide", {"2026-10-04": 23}),
])
def test_daily_aggregation_across_a_daylight_saving_change(start, zone, lengths):
    hourly = _hourly()
    element = _element(start, zone, hourly)
    by_date = _hours_of(element, hourly, start, zone)
    assert len(element["mrf"]) == MRF_DAYS and len(element["srf"]) == SRF_HOURS
    offsets = set()
    for day in element["mrf"]:
        d = datetime.fromisoformat(day["date"])
        assert (d.hour, d.minute) == (0, 0) and d.utcoffset() == ZoneInfo(zone).utcoffset(d.replace(tzinfo=None))
        offsets.add(d.utcoffset())
        idx = by_date[d.date().isoformat()]
        if d.date().isoformat() in lengths:
            assert len(idx) == lengths[d.date().isoformat()]
        elif day is not element["mrf"][0]:
            assert len(idx) == 24
        temp = hourly["temp"][idx, 0]
        first = datetime.fromisoformat(element["srf"][0]["date"])
        if day is element["mrf"][0] and (first.hour, first.minute) != (0, 0):
            # A first day the forecast starts after its midnight: no whole-day values.
            assert [day[k] for k in WHOLE_DAY] == [-9999] * len(WHOLE_DAY)
        else:
            assert day["maxtemp"] == pytest.approx(temp.max()) and day["mintemp"] == pytest.approx(temp.min())
            share = _shares(d, zone, start, len(hourly["wx"]))
            assert day["prec"] == pytest.approx((share * hourly["prec"][:, 0]).sum(), abs=0.0501)
            assert day["rhum"] == int(np.round((share * hourly["rhum"][:, 0]).sum() / share.sum()))
            assert day["solrad"] == pytest.approx((share * hourly["solrad"][:, 0]).sum() / share.sum(), abs=0.0501)
        assert day["pop"] == int(hourly["pop"][idx, 0].max())
        assert day["wx"] == int(codes.wx_daily(hourly["wx"][idx, 0]))
    assert len(offsets) == 2  # the change is inside the 14 days
    srf_offsets = {datetime.fromisoformat(e["date"]).utcoffset() for e in element["srf"]}
    t0 = datetime.fromisoformat(start).replace(tzinfo=UTC)
    for i, e in enumerate(element["srf"]):
        assert datetime.fromisoformat(e["date"]) == t0 + timedelta(hours=i)
    assert srf_offsets <= offsets


@pytest.mark.parametrize("zone, offset", [("Asia/Kolkata", "+05:30"), ("Asia/Kathmandu", "+05:45"),
                                          ("Pacific/Chatham", "+13:45"), ("Pacific/Pago_Pago", "-11:00"),
                                          ("Pacific/Kiritimati", "+14:00"), ("UTC", "+00:00")])
def test_fractional_and_extreme_offsets(zone, offset):
    start = "2026-11-20T00:00"
    element = _element(start, zone)
    assert element["srf"][0]["date"] == (datetime(2026, 11, 20, tzinfo=UTC)
                                         .astimezone(ZoneInfo(zone)).isoformat())
    assert all(e["date"].endswith(offset) for e in element["srf"] + element["mrf"])
    first = datetime.fromisoformat(element["srf"][0]["date"])
    assert datetime.fromisoformat(element["mrf"][0]["date"]).date() == first.date()


def test_every_zone_renders_14_local_days():
    """Every IANA zone zoneinfo knows, from a basetime at each zone's local midnight or later."""
    hourly = _hourly()
    start = np.datetime64("2026-11-20T00:00", "ns")
    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    for name in sorted(zoneinfo.available_timezones()):
        zone = ZoneInfo(name)
        element = json.loads(render_zone([(0.0, 0.0)], start, hourly, zone)[0])
        assert len(element["srf"]) == SRF_HOURS and len(element["mrf"]) == MRF_DAYS, name
        assert element["srf"][0]["date"] == t0.astimezone(zone).isoformat(), name
        days = [datetime.fromisoformat(d["date"]).date() for d in element["mrf"]]
        assert [(b - a).days for a, b in zip(days, days[1:], strict=False)] == [1] * (MRF_DAYS - 1), name


def test_the_series_must_hold_the_last_local_day():
    short = {k: v[:300] for k, v in _hourly().items()}
    with pytest.raises(ValueError, match="local day 14"):
        _element("2026-11-20T00:00", "Europe/London", short)


def test_a_series_from_local_midnight_ends_with_its_last_local_day():
    """A run starting at local midnight (JMA MSM's 15 UTC run is 00:00 in Tokyo) covers ten
    local days with exactly 240 hours, and a day of 25 hours (the end of summer time) needs
    its 25; one hour fewer leaves the last day incomplete."""
    from pointcast.products.wx import local_days, local_times

    hour = np.timedelta64(1, "h")
    for zone, start, ndays, hours in (("Asia/Tokyo", "2026-11-23T15:00", 10, 240),
                                      ("Europe/London", "2026-10-24T23:00", 1, 25)):
        times = np.datetime64(start, "ns") + np.arange(hours) * hour
        days, dates = local_days(local_times(times, ZoneInfo(zone)), ndays)
        assert sum(len(d) for d in days) == hours and len(days) == ndays, zone
        assert datetime.fromisoformat(dates[0]).time() == time(0), zone
        with pytest.raises(ValueError, match=f"local day {ndays}"):
            local_days(local_times(times[:-1], ZoneInfo(zone)), ndays)


# --------------------------------------------------------------------------- the published run


def _index(root):
    return json.loads((run_dir(root) / "json" / "global" / "index.json").read_text())


def test_global_objects_follow_the_spec(published):
    _, root, _ = published
    index = _index(root)
    assert len(index["points"]) >= 30
    basetime = datetime.fromisoformat(index["basetime"])
    for point in index["points"]:
        zone = ZoneInfo(point["time_zone"])
        assert point["time_zone"] == point_time_zone(point["lat"], point["lon"])
        assert point["cell"] == GLOBAL_5KM.cell_key(point["lat"], point["lon"])
        obj = json.loads((run_dir(root) / "json" / "global" / f"{point['id']}.json").read_text())
        assert list(obj) == ["lat", "lon", "srf", "mrf"]
        assert len(obj["srf"]) == SRF_HOURS and len(obj["mrf"]) == MRF_DAYS
        for i, e in enumerate(obj["srf"]):
            assert list(e) == SRF_FIELDS
            date = datetime.fromisoformat(e["date"])
            assert date == basetime + timedelta(hours=i) and date.utcoffset() == zone.utcoffset(date.replace(tzinfo=None))
            assert e["wx"] in SRF_CODES and isinstance(e["wnddir"], int) and 0 <= e["wnddir"] <= 16
            assert isinstance(e["rhum"], int) and 0 <= e["rhum"] <= 100 and e["prec"] >= 0
            assert 900 < e["arpress"] < 1080 and e["wndspd"] >= 0 and 0 <= e["solrad"] < 1400
            assert -80 < e["temp"] < 60
        days = [datetime.fromisoformat(e["date"]) for e in obj["mrf"]]
        assert days[0].date() == basetime.astimezone(zone).date()
        assert [(b.date() - a.date()).days for a, b in zip(days, days[1:], strict=False)] == [1] * (MRF_DAYS - 1)
        first = datetime.fromisoformat(obj["srf"][0]["date"])
        partial = (first.hour, first.minute) != (0, 0)
        for k, e in enumerate(obj["mrf"]):
            assert list(e) == MRF_FIELDS and isinstance(e["pop"], int) and 0 <= e["pop"] <= 100
            if k == 0 and partial:  # the rest of a day is no day: no whole-day values
                assert [e[k] for k in WHOLE_DAY] == [-9999] * len(WHOLE_DAY)
                assert e["wx"] in codes.WX_DAILY_CODES
                continue
            assert e["maxtemp"] >= e["mintemp"]
            assert isinstance(e["rhum"], int) and 0 <= e["rhum"] <= 100
            assert e["prec"] >= 0 and e["solrad"] >= 0 and e["wx"] in codes.WX_DAILY_CODES


def test_night_has_no_sun_and_the_daily_mean_holds_it(published):
    _, root, _ = published
    obj = json.loads((run_dir(root) / "json" / "global" / "sydney.json").read_text())
    for e in obj["srf"]:
        hour = datetime.fromisoformat(e["date"]).hour
        if hour in (0, 1, 2, 22, 23):  # Sydney's night in November (AEDT)
            assert e["solrad"] == 0
    day1 = [e["solrad"] for e in obj["srf"] if e["date"][:10] == obj["mrf"][1]["date"][:10]]
    assert len(day1) == 24 and obj["mrf"][1]["solrad"] == pytest.approx(round(sum(day1) / 24, 1), abs=0.051)


def test_hourly_file_renders_the_precomputed_element(published):
    """The server's zone conversion and the build use one function on the same stored values,
    the members' hourly precipitation included (the daily pop is each member's day total,
    docs/method.md): in the point's own zone the hourly file gives the precomputed element
    byte for byte, and the members make the days' pop."""
    _, root, _ = published
    index = _index(root)
    differs = 0
    for point in index["points"][:5]:
        data = (run_dir(root) / "json" / "global" / "hourly" / f"{point['id']}.json").read_bytes()
        start, hourly, members = read_hourly(data)
        assert set(hourly) == set(STORED_DECIMALS) and len(hourly["wx"]) == HOURS
        assert members is not None and members.amounts.shape[:2] == (HOURS, len(members.ensembles))
        mine = render_zone([(point["lat"], point["lon"])], start, hourly, ZoneInfo(point["time_zone"]), members)[0]
        built = (run_dir(root) / "json" / "global" / f"{point['id']}.json").read_bytes()
        assert mine == built
        # without the members, the days' pop would be their highest hourly one: not the same
        alone = json.loads(render_zone([(point["lat"], point["lon"])], start, hourly, ZoneInfo(point["time_zone"]))[0])
        differs += sum(a["pop"] != b["pop"] for a, b in zip(alone["mrf"], json.loads(built)["mrf"], strict=True))
    assert differs


def test_global_archive(published):
    _, root, _ = published
    ds = xr.open_zarr(root / "zarr" / "global.zarr")
    assert ds.sizes["lead_time"] == HOURS and ds.attrs["synthetic"] == 1
    assert {"wx", "temp", "prec", "arpress", "wndspd", "wnddir", "rhum", "solrad", "pop"} <= set(ds.data_vars)
    assert ds.solrad.attrs["units"] == "W m-2" and "time_zone" in ds.coords
    london = ds.sel(point="london").isel(init_time=-1)
    stored = json.loads((run_dir(root) / "json" / "global" / "london.json").read_text())
    assert [e["temp"] for e in stored["srf"][:24]] == pytest.approx(london.temp.values[:24], abs=0.051)
    # GFS supplies the first 120 h, IFS the rest (max_lead_hours)
    manifest = json.loads((run_dir(root) / "manifest.json").read_text())
    seams = manifest["products"]["global"]["seams_t2m"]
    assert [s["model"] for s in seams] == ["gfs", "ifs"]
    assert datetime.fromisoformat(seams[1]["from"]) - datetime.fromisoformat(seams[0]["from"]) == timedelta(hours=120)


# --------------------------------------------------------------------------- serving global/wx


def test_global_over_http(published):
    _, root, _ = published
    index = _index(root)
    london = next(p for p in index["points"] if p["id"] == "london")
    stored = json.loads((run_dir(root) / "json" / "global" / "london.json").read_text())
    path = "/api/v2/global/wx"
    with serving(root) as base:
        r = httpx.get(f"{base}{path}", params={"latlon": "51.5074/-0.1278"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert list(body) == ["requestId", "wxdata"] and uuid.UUID(body["requestId"]).version == 4
        assert body["wxdata"] == [{**stored, "lat": 51.5074, "lon": -0.1278}]
        again = httpx.get(f"{base}{path}", params={"latlon": "51.5074/-0.1278"}).json()
        assert again["requestId"] != body["requestId"]

        # another zone: the same hours with that zone's dates, the days regrouped
        r = httpx.get(f"{base}{path}", params={"latlon": "51.5074/-0.1278", "tz": "Asia/Tokyo"})
        assert r.status_code == 200
        tokyo = r.json()["wxdata"][0]
        assert all(e["date"].endswith("+09:00") for e in tokyo["srf"] + tokyo["mrf"])
        for a, b in zip(stored["srf"], tokyo["srf"], strict=True):
            assert datetime.fromisoformat(a["date"]) == datetime.fromisoformat(b["date"])
            assert {k: v for k, v in a.items() if k != "date"} == {k: v for k, v in b.items() if k != "date"}
        assert tokyo["mrf"][0]["date"] == "2026-11-20T00:00:00+09:00"
        # the zone name is matched without regard to case; the own zone is the default answer
        same = httpx.get(f"{base}{path}", params={"latlon": "51.5074/-0.1278", "tz": "europe/london"}).json()
        assert same["wxdata"] == body["wxdata"]
        ny = httpx.get(f"{base}{path}", params={"latlon": "51.5074/-0.1278", "tz": "America/New_York"}).json()
        assert ny["wxdata"][0]["srf"][0]["date"] == "2026-11-19T19:00:00-05:00"
        assert len(ny["wxdata"][0]["mrf"]) == MRF_DAYS

        def error(params, status, code):
            r = httpx.get(f"{base}{path}", params=params)
            assert (r.status_code, r.json()["code"]) == (status, code), (params, r.text)
            assert r.json()["status"] == status and r.json()["message"]

        error({}, 400, "400_001")
        error({"latlon": ""}, 400, "400_001")
        error({"latlon": "51.5074,-0.1278"}, 400, "400_002")  # a comma instead of the slash
        error({"latlon": "51.5074/"}, 400, "400_002")
        error({"latlon": "/-0.1278"}, 400, "400_002")
        error({"latlon": "north/west"}, 400, "400_002")
        error({"latlon": "1/2/3"}, 400, "400_002")
        error({"latlon": "NaN/0"}, 400, "400_002")
        error({"latlon": "91/0"}, 400, "400_003")
        error({"latlon": "0/180.5"}, 400, "400_003")
        error({"latlon": "51.5074/-0.1278", "tz": "Mars/Olympus_Mons"}, 400, "400_002")
        error({"latlon": "51.5074/-0.1278", "tz": "../../etc/passwd"}, 400, "400_002")
        error({"latlon": "51.5074/-0.1278", "tz": ""}, 400, "400_002")  # optional: empty is no zone
        error({"latlon": "0/-30"}, 403, "403_001")  # the Atlantic
        error({"latlon": "-75/0"}, 403, "403_001")  # Antarctica
        error({"latlon": "-62.2/-58.9"}, 403, "403_001")  # land south of 60S
        error({"latlon": "48.8566/2.3522"}, 404, "404_002")  # Paris: covered, not configured
        assert london["cell"] == GLOBAL_5KM.cell_key(51.5074, -0.1278)


def test_precipitation_neighbourhood_wraps_across_the_antimeridian():
    """Points next to 180E on a global grid (Chukotka, Fiji's Taveuni) take the cells across
    the antimeridian, and always at least their nearest cell (a coarse sample grid)."""
    from pointcast.interp import neighbourhood

    lats, lons = np.arange(-66.0, 90.1, 4.0), np.arange(-180.0, 180.0, 4.0)
    near = neighbourhood(lats, lons, np.array([68.475, -16.5]), np.array([179.35, 179.9]))
    assert near.sizes.tolist() == [1, 1] and (near.cells % len(lons) == 0).all()  # -180 is 180
    fine_lats, fine_lons = np.arange(-90.0, 90.01, 0.25), np.arange(0.0, 360.0, 0.25)  # GFS
    near = neighbourhood(fine_lats, fine_lons, np.array([-16.5]), np.array([179.9]), radius_km=60)
    cols = set((near.cells % len(fine_lons)).tolist())
    assert {719, 720, 721} <= cols  # both sides of 180E, no column dropped at the seam
    near = neighbourhood(fine_lats, fine_lons, np.array([51.5]), np.array([-0.1]), radius_km=60)
    cols = set((near.cells % len(fine_lons)).tolist())
    assert 0 in cols and 1439 in cols  # across GFS's 0/360 seam at Greenwich


def test_a_points_days_do_not_depend_on_the_points_rendered_with_it():
    """The build renders the points of a time zone together, the server one at a time: a
    point's daily totals and means must not change with the number of its neighbours (numpy
    sums one column pairwise and several row by row, which differ in the last bit)."""
    from pointcast.products.wx import daily_fields

    rng = np.random.default_rng(7)
    hourly = {k: np.round(rng.uniform(0, 900, (24 * 3, 5)), 1) for k in HOURLY_DECIMALS}
    hourly["wx"] = np.full((24 * 3, 5), 100)
    days = [np.arange(24 * d, 24 * (d + 1)) for d in range(3)]
    shares = [(idx, np.ones(len(idx))) for idx in days]
    together = daily_fields(hourly, days, shares, first_whole=True)
    for j in range(5):
        alone = daily_fields({k: v[:, j:j + 1] for k, v in hourly.items()}, days, shares, first_whole=True)
        for k in ("prec", "rhum", "solrad"):
            assert alone[k][:, 0].tobytes() == together[k][:, j].tobytes(), (k, j)
