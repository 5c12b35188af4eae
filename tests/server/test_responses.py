"""What every answer carries (``pointcast.server.responses``): caching headers, conditional requests,
HEAD; and /catalog."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime

from pointcast.server import create_app
from served import (  # noqa: F401  (the fixtures client, live and tree)
    BERLIN,
    JAPAN_POINTS,
    LADDER,
    MEDIUM,
    PARIS,
    PRODUCTS,
    ROME,
    SHORT,
    SS1WX,
    WIND,
    call_app,
    client_fixture,
    get,
    live_fixture,
    point_current,
    publish_run,
    tree_fixture,
)


def test_caching_headers(client, tree):
    r = get(client, MEDIUM, f"latlon={PARIS}&freq=1H")
    index = json.loads((tree / "current" / "json" / "eu-medium" / "index.json").read_text())
    manifest = json.loads((tree / "current" / "manifest.json").read_text())
    assert r.headers["last-modified"] == format_datetime(datetime.fromisoformat(manifest["published_at"]), usegmt=True)
    assert r.headers["last-modified"] == "Sun, 22 Nov 2026 03:46:07 GMT"  # the publication, not updated_time
    directive, _, max_age = r.headers["cache-control"].partition(", ")
    assert directive == "public" and max_age.startswith("max-age=")
    expected = datetime.fromisoformat(index["next_update"]) - datetime.now(UTC)
    assert abs(int(max_age.removeprefix("max-age=")) - expected.total_seconds()) < 60
    etag = r.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")
    # same request, same tag; another body, another tag
    assert get(client, MEDIUM, f"latlon={PARIS}&freq=1H").headers["etag"] == etag
    assert get(client, SHORT, f"latlon={PARIS}&freq=1H").headers["etag"] != etag
    assert get(client, MEDIUM, f"latlon={PARIS}&freq=30min").headers["etag"] != etag
    assert get(client, MEDIUM, "latlon=48.85660,2.3522&freq=1H").headers["etag"] != etag


def test_max_age_is_never_negative(tmp_path):
    root = tmp_path / "out"
    past = datetime.now(UTC) - timedelta(hours=1)
    publish_run(root, "old", datetime(2026, 11, 22, tzinfo=UTC), next_update=past)
    point_current(root, "old")
    r = call_app(create_app(root), "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode())
    assert r[0] == 200 and r[1][b"cache-control"] == b"public, max-age=0"


def test_if_none_match_304(client):
    r = get(client, MEDIUM, f"latlon={PARIS};{ROME}&freq=1H")
    etag = r.headers["etag"]
    for header in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
        again = get(client, MEDIUM, f"latlon={PARIS};{ROME}&freq=1H", headers={"If-None-Match": header})
        assert again.status_code == 304 and again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["cache-control"] == r.headers["cache-control"]
        assert again.headers["last-modified"] == r.headers["last-modified"]
    other = get(client, MEDIUM, f"latlon={PARIS};{ROME}&freq=1H", headers={"If-None-Match": '"nope"'})
    assert other.status_code == 200 and other.content == r.content


def test_if_modified_since_304(client):
    r = get(client, MEDIUM, f"latlon={PARIS}&freq=1H")
    lm = parsedate_to_datetime(r.headers["last-modified"])
    same = get(client, MEDIUM, f"latlon={PARIS}&freq=1H", headers={"If-Modified-Since": r.headers["last-modified"]})
    assert same.status_code == 304
    earlier = format_datetime(lm - timedelta(seconds=1), usegmt=True)
    assert get(client, MEDIUM, f"latlon={PARIS}&freq=1H", headers={"If-Modified-Since": earlier}).status_code == 200
    garbage = get(client, MEDIUM, f"latlon={PARIS}&freq=1H", headers={"If-Modified-Since": "yesterday"})
    assert garbage.status_code == 200


def test_head_is_get_without_body(client):
    start = time.monotonic()
    r = get(client, SHORT, f"latlon={BERLIN}&freq=1H")
    h = client.head(f"{SHORT}?latlon={BERLIN}&freq=1H")
    elapsed = time.monotonic() - start
    assert h.status_code == 200 and h.content == b""
    for name in ("content-type", "content-length", "content-encoding", "vary", "etag", "last-modified"):
        assert h.headers[name] == r.headers[name]
    # max-age counts the seconds to the next update: the HEAD may come a second later.
    ages = [int(x.headers["cache-control"].removeprefix("public, max-age=")) for x in (r, h)]
    assert 0 <= ages[0] - ages[1] <= int(elapsed) + 1, ages
    assert int(h.headers["content-length"]) == r.num_bytes_downloaded  # httpx asks for gzip: the bytes sent
    e = client.head(f"{SHORT}?latlon={BERLIN}&freq=2H")
    assert e.status_code == 400 and e.content == b"" and e.headers["cache-control"] == "no-store"
    assert client.head("/nowhere").status_code == 404


def test_catalog(client, tree):
    r = client.get("/catalog")
    assert r.status_code == 200
    assert r.headers["etag"] and r.headers["last-modified"] and r.headers["cache-control"].startswith("public, max-age=")
    catalog = r.json()
    assert catalog["run_id"] == "20261122T00Z"
    products = {p["product"]: p for p in catalog["products"]}
    assert set(products) == set(PRODUCTS) | {"eu-wind", "japan"}
    medium = products["eu-medium"]
    assert medium["operations"] == [MEDIUM]
    assert medium["basetime"] == "2026-11-22T00:00:00+00:00"
    assert medium["updated_time"] == "2026-11-22T03:41:07+00:00"
    assert medium["freqs"] == ["1H", "30min", "15min"]
    points = {p["id"]: p for p in medium["points"]}
    assert points["paris"] == {"id": "paris", "name": "Paris", "lat": 48.8566, "lon": 2.3522}
    assert points["berlin"]["hub_heights"] == [100, 150]
    assert "heights" not in points["berlin"]
    wind = products["eu-wind"]
    assert wind["operations"] == [WIND] and wind["freqs"] == ["1H", "30min", "15min"]
    wind_points = {p["id"]: p for p in wind["points"]}
    assert wind_points["paris"]["heights"] == LADDER
    assert wind_points["hornsea-1"]["heights"] == LADDER[:6] + [113.0] + LADDER[6:]
    assert wind_points["hornsea-1"]["hub_heights"] == [113.0]
    assert wind_points["berlin"]["heights"] == sorted(LADDER + [112.5, 150.0])
    japan = products["japan"]
    assert japan["operations"] == [SS1WX] and japan["freqs"] == []
    assert japan["basetime"] == "2026-11-22T00:00:00+00:00" and japan["updated_time"] == "2026-11-22T03:41:07+00:00"
    assert japan["points"] == [{"id": pid, "name": name, "lat": lat, "lon": lon}
                               for pid, name, lat, lon, _ in JAPAN_POINTS]
    assert client.head("/catalog").content == b""
    assert client.get("/catalog", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
