"""Point files spliced with the requested coordinates (``pointcast.server.splice``), and the fallback for
files not written in the product's own style."""

from __future__ import annotations

import json

from pointcast.server.splice import WX_LAYOUT, PointFile


def test_point_file_splice_and_fallback():
    compact = b'{"latitude":1.5,"longitude":2.5,"basetime":"t","data":[]}\n'
    spaced = b'{"latitude": 1.5, "longitude": 2.5, "basetime": "t", "data": []}'
    reordered = b'{"basetime": "t", "latitude": 1.5, "data": [], "longitude": 2.5}'
    for data in (compact, spaced, reordered):
        point = PointFile.from_bytes(data)
        spliced = json.loads(b"".join(point.splice(b"-3.0", b"4.25")))
        assert spliced == {"latitude": -3.0, "longitude": 4.25, "basetime": "t", "data": []}


def test_japan_point_file_splice_and_fallback():
    compact_ = b'{"lat":35.6,"lon":139.7,"srf":[{"date":"d","wx":100}],"mrf":[]}\n'
    spaced = b'{"lat": 35.6, "lon": 139.7, "srf": [{"date": "d", "wx": 100}], "mrf": []}'
    reordered = b'{"srf": [{"date": "d", "wx": 100}], "lat": 35.6, "mrf": [], "lon": 139.7}'
    for data in (compact_, spaced, reordered):
        point = PointFile.from_bytes(data, WX_LAYOUT)
        spliced = json.loads(b"".join(point.splice(b"36.0", b"140.25")))
        assert spliced == {"lat": 36.0, "lon": 140.25, "srf": [{"date": "d", "wx": 100}], "mrf": []}
    assert b"".join(PointFile.from_bytes(compact_, WX_LAYOUT).splice(b"1.5", b"2.5")) == (
        b'{"lat":1.5,"lon":2.5,"srf":[{"date":"d","wx":100}],"mrf":[]}')
