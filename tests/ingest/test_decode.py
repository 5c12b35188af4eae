"""The header pass's kept concepts and the value decoding, on GRIB2 messages written with ecCodes."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import eccodes
import numpy as np
import pytest

from pointcast import ingest
from pointcast.gribtable import Processing
from pointcast.ingest import scan
from pointcast.ingest.values import _block, _Read, _Term


def write(path: Path, messages: list[dict], values: np.ndarray | None = None) -> Path:
    """GRIB2 messages on a 3 x 4 regular grid, each from ecCodes' GRIB2 sample with ``keys`` set."""
    with open(path, "wb") as f:
        for keys in messages:
            h = eccodes.codes_grib_new_from_samples("GRIB2")
            try:
                eccodes.codes_set_key_vals(h, {"centre": "ecmf", "Ni": 4, "Nj": 3,
                                               "iDirectionIncrementInDegrees": 1.0,
                                               "jDirectionIncrementInDegrees": 1.0,
                                               "latitudeOfFirstGridPointInDegrees": 50.0,
                                               "longitudeOfFirstGridPointInDegrees": 0.0,
                                               "latitudeOfLastGridPointInDegrees": 48.0,
                                               "longitudeOfLastGridPointInDegrees": 3.0})
                for key, value in keys.items():
                    eccodes.codes_set(h, key, value)
                data = values if values is not None else np.arange(12, dtype=float) + 280.0
                if np.isnan(data).any():
                    eccodes.codes_set(h, "bitmapPresent", 1)
                    eccodes.codes_set(h, "missingValue", 1e20)
                    data = np.where(np.isnan(data), 1e20, data)
                eccodes.codes_set_values(h, data)
                eccodes.codes_write(h, f)
            finally:
                eccodes.codes_release(h)
    return path


def fresh(path: Path) -> list[tuple]:
    """What ecCodes itself says of each message, without the kept concepts."""
    out = []
    with open(path, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f, headers_only=True)) is not None:
            out.append(tuple(eccodes.codes_get_string(h, k) for k in ("shortName", "typeOfLevel", "stepType")))
            eccodes.codes_release(h)
    return out


def test_concepts_are_kept_across_forecast_times_but_not_across_period_lengths(tmp_path):
    path = write(tmp_path / "run.grib2", [
        {"shortName": "2t", "stepRange": "0"},
        {"shortName": "2t", "stepRange": "6"},
        {"shortName": "mx2t3", "stepRange": "3-6"},  # 3-hour maximum: lengthOfTimeRange 3
        {"shortName": "mx2t6", "stepRange": "0-6"},  # 6-hour maximum: a different shortName
        {"shortName": "tp", "stepRange": "0-6"},
        {"shortName": "tp", "stepRange": "0-12"},
        {"shortName": "tp", "stepRange": "0-18"},
        {"shortName": "mx2t3", "stepRange": "0-3"},
    ])
    truth = fresh(path)
    assert [t[0] for t in truth] == ["2t", "2t", "mx2t3", "mx2t6", "tp", "tp", "tp", "mx2t3"]
    ingest.forget_descriptions()
    msgs = ingest.index_file(path)
    assert [(m.shortName, m.typeOfLevel, m.stepType) for m in msgs] == truth
    assert [(m.start_minutes, m.end_minutes) for m in msgs] == [
        (0, 0), (360, 360), (180, 360), (0, 360), (0, 360), (0, 720), (0, 1080), (0, 180)]
    # The two 2t messages, and the two 3-hour maxima, differ only in their forecast time: one
    # kept description for each pair. The maxima differ in their period's length: one each,
    # never a length-blind one. The accumulation since the start was described by ecCodes for
    # two lengths alike: its third length is read from that description, not asked.
    assert len(scan._DESCRIBED) == 5
    assert list(scan._WINDOWS.values()) == [scan._Described(
        "tp", "surface", "accum", msgs[4].grid, 0, 228, "m", "0/1/193", True)]
    again = ingest.index_file(path)  # from the kept descriptions
    assert again == msgs


def test_headers_read_from_bytes_agree_with_ecCodes_past_junk_and_grib1(tmp_path):
    """The header pass's own reading (after the first message of a kind) gives what ecCodes
    gives for every message: steps in hours and in minutes (DWD), maxima, accumulations; and
    ecCodes reads on from bytes that are not a GRIB2 message (junk, GRIB1)."""
    grib2 = write(tmp_path / "a.grib2", [
        {"shortName": "2t", "stepRange": "0"}, {"shortName": "2t", "stepRange": "6"},
        {"shortName": "2t", "stepUnits": "m", "stepRange": "75"},  # forecast time in minutes
        {"shortName": "2t", "stepUnits": "m", "stepRange": "90"},
        {"shortName": "tp", "stepRange": "0-6"}, {"shortName": "tp", "stepRange": "0-12"},
        {"shortName": "10fg3", "stepRange": "3-6"}, {"shortName": "10fg3", "stepRange": "6-9"},
    ]).read_bytes()
    h = eccodes.codes_grib_new_from_samples("GRIB1")
    grib1 = eccodes.codes_get_message(h)
    eccodes.codes_release(h)
    path = tmp_path / "mixed.grib"
    path.write_bytes(grib2 + b"\0" * 7 + grib1 + grib2)
    truth = []
    with open(path, "rb") as f:  # ecCodes alone, message by message
        while (h := eccodes.codes_grib_new_from_file(f, headers_only=True)) is not None:
            offset = eccodes.codes_get_long(h, "offset")
            truth.append(scan.dc_replace(scan._eccodes_message(h, path, offset),
                                           number=len(truth) + 1))
            eccodes.codes_release(h)
    assert [m.edition for m in truth] == [2] * 8 + [1] + [2] * 8
    ingest.forget_descriptions()
    assert ingest.index_file(path) == truth
    assert all(known.times_from_bytes for known in scan._DESCRIBED.values())
    assert ingest.index_file(path) == truth  # every GRIB2 header now known
    assert [(m.start_minutes, m.end_minutes) for m in truth[:8]] == [
        (0, 0), (360, 360), (75, 75), (90, 90), (0, 360), (0, 720), (180, 360), (360, 540)]


def test_missing_points_become_nan_and_9999_stays_a_value(tmp_path):
    vis = np.array([9999.0, 20000.0, np.nan, 150.0, 9999.0, np.nan, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    path = write(tmp_path / "vis.grib2", [{"discipline": 0, "parameterCategory": 19,
                                           "parameterNumber": 0, "typeOfFirstFixedSurface": 1}],
                 values=vis)
    (m,) = ingest.index_file(path)
    got = ingest.read_values(m.path, m.offset, m.length, m.grid.shape, m.grid.north_first)
    expected = vis.reshape(3, 4)[::-1]  # north first in the file, ascending latitudes out
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert np.allclose(got[~np.isnan(got)], expected[~np.isnan(expected)], atol=0.5)
    assert got.dtype == np.float32


def test_a_block_reuses_its_buffers_and_differences_windows(tmp_path):
    """Three steps of an accumulation and an average in one block each: the values are the
    intervals' (the differences of windows that share their start)."""
    tp = [np.full(12, v) for v in (0.0, 2.0, 5.0)]
    paths = [write(tmp_path / f"tp{k}.grib2", [{"shortName": "tp", "stepRange": f"0-{6 * k}"}],
                   values=tp[k]) for k in range(1, 3)]
    msgs = [m for p in paths for m in ingest.index_file(p)]
    reads = [_Read(m.path, m.offset, m.length, m.grid.shape, m.grid.north_first, 1.0, 0.0)
             for m in msgs]
    accum = _Term(0, None, (0, 0, 360), Processing.ACCUM_SINCE_START)
    diff = _Term(1, 0, (0, 360, 720), Processing.ACCUM_SINCE_START)
    avg = _Term(1, 0, (0, 360, 720), Processing.AVG_SINCE_START)
    block = _block((3, 3, 4), ((accum,), (diff,), (_Term(None),)), *reads)
    assert np.allclose(block[0], 2.0) and np.allclose(block[1], 3.0) and np.isnan(block[2]).all()
    # The mean over (6 h, 12 h] of means since the start of 2 and 5: (5 * 12 - 2 * 6) / 6 = 8.
    mean = _block((1, 3, 4), ((avg,),), *reads)
    assert np.allclose(mean, 8.0)


def test_a_truncated_message_is_named_at_the_header_pass(tmp_path):
    whole = write(tmp_path / "a.grib2", [{"shortName": "2t", "stepRange": "0"},
                                         {"shortName": "2t", "stepRange": "6"}]).read_bytes()
    cut = tmp_path / "cut.grib2"
    cut.write_bytes(whole[:-40])
    ingest.forget_descriptions()
    with pytest.raises(ingest.DecodeError, match="truncated"):
        ingest.index_file(cut)


def test_a_file_cut_inside_its_headers_is_an_error_not_a_hang(tmp_path):
    whole = write(tmp_path / "a.grib2", [{"shortName": "2t", "stepRange": "0"}]).read_bytes()
    cut = tmp_path / "cut.grib2"
    cut.write_bytes(whole[:30])  # inside section 1
    with pytest.raises(ingest.DecodeError):
        ingest.index_file(cut)


def test_a_maximum_keeps_the_window_its_message_states(tmp_path):
    """IFS's gust at 3-hourly steps: the last hour to 90 h (stepRange 2-3), 3 hours after
    (90-93). Decode keeps each window's start (``starts_minutes``), not the previous step."""
    from pointcast.sources.ifs import FIELDS

    path = write(tmp_path / "gust.grib2", [
        {"paramId": 49, "typeOfFirstFixedSurface": 103, "scaledValueOfFirstFixedSurface": 10,
         "productDefinitionTemplateNumber": 8, "stepRange": r}
        for r in ("2-3", "5-6", "89-90")] + [
        {"paramId": 228028, "typeOfFirstFixedSurface": 103, "scaledValueOfFirstFixedSurface": 10,
         "productDefinitionTemplateNumber": 8, "stepRange": "90-93"}])
    ds = ingest.decode([path], [r for r in FIELDS if r.var == "gust"], model="ifs")
    assert ds.gust.attrs["steps_minutes"] == [180, 360, 5400, 5580]
    assert ds.gust.attrs["starts_minutes"] == [120, 300, 5340, 5400]


# ------------------------------------------------------------------------------------------
# Multi-field messages and the meaning of each message
# ------------------------------------------------------------------------------------------


def test_a_multi_field_msm_file_decodes_every_field(tmp_path):
    """JMA's Lsurf file is one GRIB2 message of many fields (the sample writes it so): every
    field is indexed (message 1, fields 1..n) and decodes to what ecCodes, with its own
    multi-field support on, reads from that field."""
    from datetime import datetime

    from pointcast.sample import SampleSource
    from pointcast.sources import MSM

    src = SampleSource(scale=32, init="2026-01-15T00:00Z", horizon_hours=2)
    run = src.discover(MSM, datetime(2026, 1, 15, 17, tzinfo=UTC))
    (path,) = src.fetch(run, MSM, tmp_path).files
    ingest.forget_descriptions()
    msgs = ingest.index_file(path)
    assert {m.number for m in msgs} == {1} and [m.field for m in msgs] == list(range(1, 29))
    assert all(m.parts is not None for m in msgs)  # 8 fields at step 0, 10 at steps 1 and 2
    truth = []
    eccodes.codes_grib_multi_support_on()
    try:
        with open(path, "rb") as f:
            while (h := eccodes.codes_grib_new_from_file(f)) is not None:
                name = eccodes.codes_get_string(h, "shortName")
                param = eccodes.codes_get_long(h, "parameterNumber")
                nj, ni = eccodes.codes_get_long(h, "Nj"), eccodes.codes_get_long(h, "Ni")
                values = eccodes.codes_get_values(h).reshape(nj, ni)[::-1]
                eccodes.codes_set_long(h, "stepUnits", 0)
                truth.append((name, param, eccodes.codes_get_long(h, "endStep"), values))
                eccodes.codes_release(h)
    finally:
        eccodes.codes_grib_multi_support_off()
    assert [t[0] for t in truth] == [m.shortName for m in msgs]
    ds = ingest.decode([path], MSM.fields, model="msm").compute()
    assert set(ds.data_vars) == {r.var for r in MSM.fields} and "refused" not in ds.attrs
    var_of = {(r.shortName, r.encodings[0].parameter.split("/")[2]): r.var for r in MSM.fields}
    checked = 0
    for name, param, minute, values in truth:
        var = var_of[(name, str(param))]
        k = list(ds.time.values).index(ds.time.values[0] + np.timedelta64(minute, "m"))
        np.testing.assert_allclose(ds[var].values[k], values, rtol=1e-6, atol=1e-4)
        checked += 1
    assert checked == 28


def test_ifs_total_cloud_cover_in_per_cent_or_as_a_fraction_decodes_in_per_cent(tmp_path):
    """paramId 228164 (%) and 164 (0-1): both decode as shortName tcc; the fraction is x100."""
    from pointcast.sources import IFS

    cover = np.linspace(0.0, 0.93, 12)
    per_cent = write(tmp_path / "a.grib2", [{"paramId": 228164, "stepRange": "0"}], cover * 100)
    fraction = write(tmp_path / "b.grib2", [{"paramId": 164, "stepRange": "3"}], cover)
    ingest.forget_descriptions()
    msgs = [m for p in (per_cent, fraction) for m in ingest.index_file(p)]
    assert [(m.shortName, m.paramId, m.units) for m in msgs] == [
        ("tcc", 228164, "%"), ("tcc", 164, "(0 - 1)")]
    ds = ingest.decode([per_cent, fraction], IFS.fields, model="ifs").compute()
    expected = (cover * 100).reshape(3, 4)[::-1]
    np.testing.assert_allclose(ds.tcc.values[0], expected, atol=0.01)
    np.testing.assert_allclose(ds.tcc.values[1], expected, atol=0.01)
    assert ds.tcc.attrs["units"] == "%" and "refused" not in ds.attrs


def test_a_message_with_unexpected_units_is_refused_naming_file_message_and_key(tmp_path, caplog):
    """An IFS file whose tp is in kg m-2 (paramId 228228, what GFS writes) where the table
    expects metres (228): tp is refused, the rest decodes, and the reason says where."""
    from pointcast.sources import IFS

    path = write(tmp_path / "run.grib2", [
        {"shortName": "2t", "stepRange": "6"},
        {"paramId": 228228, "stepRange": "0-6"},
        {"paramId": 228228, "stepRange": "0-12"},
        {"shortName": "2t", "stepRange": "12"}])
    ingest.forget_descriptions()
    assert [m.shortName for m in ingest.index_file(path)] == ["2t", "tp", "tp", "2t"]
    with caplog.at_level("WARNING", logger="pointcast.ingest"):
        ds = ingest.decode([path], IFS.fields, model="ifs")
    assert set(ds.data_vars) == {"t2m"}
    (reason,) = ds.attrs["refused"].splitlines()
    assert reason.startswith("tp refused: run.grib2 message 2: paramId 228228 (0/1/52) in "
                             "'kg m**-2', the table expects paramId 228 in 'm'")
    assert reason.endswith("(and 1 more messages)")
    assert reason in caplog.text
    # A run with nothing left to decode says why.
    only_tp = write(tmp_path / "tp.grib2", [{"paramId": 228228, "stepRange": "0-6"}])
    with pytest.raises(ingest.DecodeError, match="tp refused: tp.grib2 message 1: paramId 228228"):
        ingest.decode([only_tp], IFS.fields, model="ifs")


def test_a_field_without_its_statistical_processing_is_refused(tmp_path):
    """GFS's total cloud row is the instantaneous message: a run that only has the average
    over the 6-hour window refuses tcc, saying which step type it met."""
    from pointcast.sources import GFS

    path = write(tmp_path / "gfs.grib2", [
        {"centre": "kwbc", "shortName": "2t", "stepRange": "6"},
        {"centre": "kwbc", "productDefinitionTemplateNumber": 8, "discipline": 0,
         "parameterCategory": 6, "parameterNumber": 1, "typeOfFirstFixedSurface": 10,
         "typeOfStatisticalProcessing": 0, "stepRange": "0-6"}], np.full(12, 50.0))
    ingest.forget_descriptions()
    ds = ingest.decode([path], GFS.fields, model="gfs")
    assert set(ds.data_vars) == {"t2m"}
    assert ds.attrs["refused"] == ("tcc refused: gfs.grib2 message 2: stepType 'avg' (tcc), "
                                   "the table expects 'instant'")


def test_a_multi_field_message_after_bytes_that_are_not_grib(tmp_path):
    """Past junk, ecCodes finds the message; its fields are still read one by one, and a
    field whose bitmap section says "the previous bitmap applies" (254) gets that bitmap."""
    from pointcast.sample import multi_field

    values = np.arange(12, dtype=float) + 280.0
    values[[1, 5]] = np.nan
    one = write(tmp_path / "a.grib2", [{"shortName": "2t", "stepRange": "0"}], values).read_bytes()
    two = write(tmp_path / "b.grib2", [{"shortName": "2t", "stepRange": "6"}], values + 1).read_bytes()
    message = bytearray(multi_field([one, two]))
    # The second field's section 6 says "previous bitmap" (indicator 254, no bitmap bytes).
    pos, seen = 16, 0
    while message[pos:pos + 4] != b"7777":
        size, number = int.from_bytes(message[pos:pos + 4], "big"), message[pos + 4]
        if number == 6:
            seen += 1
            if seen == 2:
                message[pos:pos + size] = (6).to_bytes(4, "big") + bytes([6, 254])
                message[8:16] = (len(message)).to_bytes(8, "big")
                break
        pos += size
    path = tmp_path / "junk.grib2"
    path.write_bytes(b"junk" * 3 + bytes(message))
    ingest.forget_descriptions()
    msgs = ingest.index_file(path)
    assert [(m.number, m.field, m.end_minutes) for m in msgs] == [(1, 1, 0), (1, 2, 360)]
    for m, expected in zip(msgs, (values, values + 1), strict=True):
        got = ingest.read_values(m.path, m.offset, m.length, m.grid.shape, m.grid.north_first,
                                 parts=m.parts)
        want = expected.reshape(3, 4)[::-1]
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.allclose(got[~np.isnan(got)], want[~np.isnan(want)], atol=0.01)
