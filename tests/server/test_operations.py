"""The common operations (medium-range and short-range common) end to end: the answers for one and several
points, every frequency, the echo of the requested text; the operations table
(``pointcast.server.operations``). The tree, the server and the client are tests/support/served.py's."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from pointcast.server import OPERATIONS
from served import (  # noqa: F401  (the fixtures client, live and tree)
    BERLIN,
    FREQ_STEPS,
    MEDIUM,
    PARIS,
    PRODUCTS,
    ROME,
    SHORT,
    SS1WX,
    WIND,
    _same_cell_neighbour,
    client_fixture,
    get,
    live_fixture,
    point_file,
    raw_get,
    tree_fixture,
)


@pytest.mark.parametrize("product,path", PRODUCTS.items())
def test_single_point_1h(client, tree, product, path):
    r = get(client, path, f"latlon={PARIS}&freq=1H")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert list(body) == [PARIS]
    stored = point_file(tree, "20261122T00Z", product, "1H", "paris")
    assert body[PARIS] == stored
    assert list(body[PARIS])[:3] == ["latitude", "longitude", "basetime"]
    assert body[PARIS]["basetime"] == "2026-11-22T00:00:00+00:00"


@pytest.mark.parametrize("separator", [";", "%3B", "%7C"])
def test_several_points(client, tree, separator):
    r = get(client, MEDIUM, f"latlon={BERLIN}{separator}{PARIS}{separator}{ROME}&freq=1H")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == [BERLIN, PARIS, ROME]  # request order
    for key, pid in zip(body, ["berlin", "paris", "rome"], strict=True):
        assert body[key] == point_file(tree, "20261122T00Z", "eu-medium", "1H", pid)


def test_literal_pipe_separator(live):
    _, _, port = live
    status, headers, body = raw_get(port, f"{SHORT}?latlon={PARIS}|{ROME}&freq=1H".encode())
    assert status == 200, body
    assert list(json.loads(body)) == [PARIS, ROME]


def test_ten_pairs_allowed(client):
    latlon = ";".join([PARIS, BERLIN] * 5)
    r = get(client, MEDIUM, f"latlon={latlon}&freq=1H")
    assert r.status_code == 200
    assert list(r.json()) == [PARIS, BERLIN]  # the same text twice is one key


@pytest.mark.parametrize("freq", ["15min", "30min"])
@pytest.mark.parametrize("path", [MEDIUM, SHORT])
def test_subhourly_single_pair(client, tree, path, freq):
    r = get(client, path, f"latlon={BERLIN}&freq={freq}")
    assert r.status_code == 200, r.text
    value = r.json()[BERLIN]
    assert value["freq"] == freq
    times = [datetime.fromisoformat(e["datetime"]) for e in value["data"]]
    assert times[1] - times[0] == timedelta(minutes=FREQ_STEPS[freq])
    assert all(e["datetime"].endswith("+00:00") for e in value["data"])


def test_echo_of_requested_coordinates(client, tree):
    lat, lon = _same_cell_neighbour(48.8566, 2.3522)
    text = f"{lat},{lon}"
    r = get(client, MEDIUM, f"latlon={text}&freq=1H")
    assert r.status_code == 200, r.text
    value = r.json()[text]
    assert (value["latitude"], value["longitude"]) == (lat, lon)
    stored = point_file(tree, "20261122T00Z", "eu-medium", "1H", "paris")
    assert {k: v for k, v in value.items() if k not in ("latitude", "longitude")} == {
        k: v for k, v in stored.items() if k not in ("latitude", "longitude")
    }


@pytest.mark.parametrize(
    "sent,key,lat,lon",
    [
        ("%2B48.85660,2.3522", "+48.85660,2.3522", 48.8566, 2.3522),
        ("48.8566,%202.3522", "48.8566, 2.3522", 48.8566, 2.3522),
        ("48.8566,+2.3522", "48.8566, 2.3522", 48.8566, 2.3522),  # form encoding: + is a space
        ("4.88566e1,2.3522", "4.88566e1,2.3522", 48.8566, 2.3522),
        ("52.520,13.4050", "52.520,13.4050", 52.52, 13.405),
        ("%35%32.52,13.405", "52.52,13.405", 52.52, 13.405),
    ],
)
def test_keys_are_the_pair_text_exactly(client, sent, key, lat, lon):
    r = get(client, MEDIUM, f"latlon={sent}&freq=1H")
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == [key]
    assert (body[key]["latitude"], body[key]["longitude"]) == (lat, lon)
    assert isinstance(body[key]["latitude"], float)


def test_unknown_parameters_are_ignored(client):
    r = get(client, MEDIUM, f"apikey=x&latlon={PARIS}&foo=%E2%9C%93&freq=1H&freq=1H&latlon={PARIS}")
    assert r.status_code == 200
    assert list(r.json()) == [PARIS]


def test_operations_table():
    assert OPERATIONS[MEDIUM].product == "eu-medium" and OPERATIONS[SHORT].product == "eu-short"
    assert OPERATIONS[WIND].product == "eu-wind" and OPERATIONS[WIND].name == "short-range-windpack"
    assert OPERATIONS[SS1WX].product == "japan" and OPERATIONS[SS1WX].name == "ss1wx"
    assert OPERATIONS[SS1WX].params == ("lat", "lon")
    assert OPERATIONS["/catalog"].product is None
