"""Tests of pointcast.codes: weather-type rules at their boundaries, 16-point compass."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pointcast import codes

NAN = float("nan")


def wx(cloud=50.0, precip=0.0, snow=0.0, t2m=10.0, vis=20000.0, cape=0.0):
    return codes.weather_type(cloud, precip, snow, t2m, vis, cape).item()


def test_labels_are_the_sixteen_of_the_design():
    assert codes.WEATHER_TYPES == (
        "Clear sky", "Mainly clear", "Partly cloudy", "Overcast", "Fog", "Drizzle",
        "Freezing drizzle", "Rain", "Heavy rain", "Freezing rain", "Sleet", "Snow",
        "Heavy snow", "Rain showers", "Snow showers", "Thunderstorm",
    )  # fmt: skip


# One case per label, each just inside the boundary that makes it.
CASES = [
    ("Clear sky", dict(cloud=12.5)),
    ("Mainly clear", dict(cloud=np.nextafter(12.5, 13))),
    ("Mainly clear", dict(cloud=37.5)),
    ("Partly cloudy", dict(cloud=np.nextafter(37.5, 38))),
    ("Partly cloudy", dict(cloud=75.0)),
    ("Overcast", dict(cloud=np.nextafter(75.0, 76))),
    ("Overcast", dict(cloud=100.0, precip=np.nextafter(0.1, 0), vis=1000.0)),
    ("Fog", dict(cloud=100.0, vis=np.nextafter(1000.0, 0))),
    ("Fog", dict(cloud=0.0, precip=0.09, vis=200.0)),
    ("Drizzle", dict(cloud=np.nextafter(75.0, 76), precip=0.1)),
    ("Drizzle", dict(cloud=100.0, precip=np.nextafter(0.5, 0), cape=np.nextafter(500.0, 0))),
    ("Rain", dict(cloud=100.0, precip=0.5)),
    ("Rain", dict(cloud=75.0, precip=0.1)),
    ("Rain", dict(cloud=100.0, precip=np.nextafter(4.0, 0))),
    ("Rain", dict(cloud=100.0, precip=2.0, snow=np.nextafter(0.4, 0))),
    ("Heavy rain", dict(cloud=100.0, precip=4.0)),
    ("Freezing drizzle", dict(cloud=100.0, precip=0.3, t2m=0.0)),
    ("Freezing rain", dict(cloud=100.0, precip=0.5, t2m=-3.0)),
    ("Freezing rain", dict(cloud=60.0, precip=0.3, t2m=-3.0)),
    ("Freezing rain", dict(cloud=100.0, precip=2.0, t2m=-0.5, cape=800.0)),
    ("Rain", dict(cloud=100.0, precip=2.0, t2m=np.nextafter(0.0, 1))),
    ("Sleet", dict(precip=1.0, snow=0.2, t2m=1.0)),
    ("Sleet", dict(precip=1.0, snow=np.nextafter(0.8, 0), t2m=1.0, cape=700.0)),
    ("Snow", dict(precip=1.0, snow=0.8, t2m=-1.0)),
    ("Snow", dict(precip=2.6, snow=np.nextafter(2.5, 0), t2m=-1.0)),
    ("Heavy snow", dict(precip=2.5, snow=2.5, t2m=-1.0)),
    ("Snow showers", dict(precip=3.0, snow=3.0, t2m=-1.0, cape=500.0)),
    ("Snow showers", dict(precip=np.nextafter(1.0, 0), snow=0.9, t2m=-1.0, cape=2000.0)),
    ("Rain showers", dict(cloud=100.0, precip=0.2, cape=500.0)),
    ("Rain showers", dict(precip=6.0, cape=np.nextafter(1000.0, 0))),
    ("Thunderstorm", dict(precip=1.0, cape=1000.0)),
    ("Thunderstorm", dict(precip=20.0, snow=20.0, t2m=-2.0, cape=1500.0)),
]


@pytest.mark.parametrize(("label", "inputs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_weather_type_rule_boundaries(label, inputs):
    assert wx(**inputs) == label


def test_every_label_is_reachable():
    assert {label for label, _ in CASES} == set(codes.WEATHER_TYPES)


def test_weather_type_is_vectorised_object_array():
    columns = list(zip(*[(i.get("cloud", 50.0), i.get("precip", 0.0), i.get("snow", 0.0), i.get("t2m", 10.0),
                          i.get("vis", 20000.0), i.get("cape", 0.0)) for _, i in CASES]))  # fmt: skip
    got = codes.weather_type(*(np.array(c) for c in columns))
    assert got.dtype == object
    assert list(got) == [label for label, _ in CASES]
    grid = codes.weather_type(np.array([[0.0], [100.0]]), np.array([0.0, 5.0]), 0.0, 10.0, 5000.0, 0.0)
    assert grid.shape == (2, 2)
    assert grid.tolist() == [["Clear sky", "Heavy rain"], ["Overcast", "Heavy rain"]]


def test_weather_type_missing_inputs():
    # Missing CAPE counts as stable, missing visibility as no fog.
    assert wx(cloud=0.0, vis=NAN, cape=NAN) == "Clear sky"
    assert wx(precip=5.0, cape=NAN) == "Heavy rain"
    # Missing values that decide the label give None instead of a guess.
    assert wx(precip=NAN) is None
    assert wx(cloud=NAN) is None
    assert wx(cloud=NAN, vis=300.0) == "Fog"
    assert wx(precip=1.0, snow=NAN) is None
    assert wx(precip=1.0, t2m=NAN) is None
    assert wx(precip=1.0, snow=1.0, t2m=NAN) == "Snow"
    assert wx(cloud=NAN, precip=0.3) is None
    assert wx(cloud=NAN, precip=0.3, cape=600.0) == "Rain showers"
    assert wx(cloud=NAN, precip=2.0) == "Rain"
    assert wx(cloud=NAN, precip=2.0, snow=NAN, cape=1200.0) == "Thunderstorm"


def test_weather_type_tolerates_processing_noise():
    # Slightly negative rates from de-accumulation are dry; snow a hair above the total is all snow.
    assert wx(cloud=0.0, precip=-1e-6, snow=-1e-6) == "Clear sky"
    assert wx(precip=1.0, snow=1.0000001, t2m=-2.0) == "Snow"


rates = st.floats(0.0, 60.0)


@given(
    st.floats(0.0, 100.0), rates, st.floats(0.0, 1.0), st.floats(-40.0, 45.0),
    st.floats(0.0, 1e5) | st.just(NAN), st.floats(0.0, 5000.0) | st.just(NAN),
)  # fmt: skip
def test_weather_type_always_gives_a_label_for_complete_inputs(cloud, precip, snow_fraction, t2m, vis, cape):
    label = wx(cloud, precip, precip * snow_fraction, t2m, vis, cape)
    assert label in codes.WEATHER_TYPES
    assert (label in codes.WEATHER_TYPES[:5]) == (precip < 0.1)


# --- compass16 --------------------------------------------------------------------


def test_compass16_cardinal_points():
    got = codes.compass16(5.0, np.array([0.0, 22.5, 90.0, 180.0, 270.0, 337.5, 360.0, -90.0, 720.0 + 45.0]))
    np.testing.assert_array_equal(got, [16, 1, 4, 8, 12, 15, 16, 12, 2])
    assert got.dtype.kind == "i"


@pytest.mark.parametrize("k", range(16))
def test_compass16_every_sector_boundary(k):
    # Sector k + 1 is centred on 22.5 * (k + 1) deg and owns its anticlockwise edge.
    edge = 11.25 + 22.5 * k
    inside, outside = (k + 1, k if k else 16)
    got = codes.compass16(1.0, np.array([edge, np.nextafter(edge, 0.0)]))
    np.testing.assert_array_equal(got, [inside, outside])


def test_compass16_calm_and_missing():
    got = codes.compass16(
        np.array([0.0, np.nextafter(0.3, 0), 0.3, 0.2, NAN, 2.0]),
        np.array([90.0, 90.0, 90.0, NAN, 90.0, NAN]),
    )
    np.testing.assert_array_equal(got, [0, 0, 4, 0, codes.MISSING_CODE, codes.MISSING_CODE])


@given(st.floats(0.3, 80.0), st.floats(0.0, 360.0, exclude_max=True))
def test_compass16_centre_within_half_a_sector(speed, direction):
    code = int(codes.compass16(speed, direction))
    assert 1 <= code <= 16
    centre = 22.5 * code
    assert abs((direction - centre + 180.0) % 360.0 - 180.0) <= 11.25
