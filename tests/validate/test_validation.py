"""The validation gate on a real cycle's outputs, corrupted one way at a time, and
in the flow: a run that fails is kept under runs/failed/ with its reasons, never served."""

from __future__ import annotations

import copy
import json
import logging
import pickle

import numpy as np
import pytest

from opscycle import archived, make_world, served_run
from pointcast import contract
from pointcast.config import load_config
from pointcast.validate import validate


@pytest.fixture(scope="module")
def real(tmp_path_factory, prefect_harness):
    """(config, outputs, world): what a real cycle with the four products (run B of the world)
    handed its validation and publish stages."""
    base = tmp_path_factory.mktemp("validation")
    world = make_world(base)
    _, outputs, report, _ = pickle.loads(world.publish_args.read_bytes())
    assert report["ok"] is True
    return load_config(base / "warm-b" / "pointcast.toml"), outputs, world


def _corrupt(outputs, pid, archive=None, files=None):
    """The outputs with ``pid``'s archive or files edited; an edited archive or edited files
    go without the facts its build slices found, so that the gate finds them in them."""
    out = {k: copy.copy(v) for k, v in outputs.items()}
    o = out[pid]
    o.files = dict(o.files)
    if archive is not None:
        o.archive = archive(o.archive.copy(deep=True))
        o.facts = None
    if files is not None:
        files(o.files)
        o.file_facts = None
    return out


def _set(ds, var, value, **where):
    ds[var].loc[where] = value
    return ds


def _edit_json(path, edit):
    def apply(files):
        obj = json.loads(files[path])
        edit(obj)
        files[path] = json.dumps(obj).encode()
    return apply


def _drop_point(ds):
    return ds.drop_sel(point="paris")


CORRUPTIONS = {
    "nan": ("eu-short", dict(archive=lambda ds: _set(ds, "temp_2m", np.nan, point="paris",
                                                     lead_time=ds.lead_time.values[40])),
            "eu-short: temp_2m has 1 NaN"),
    "temperature-out-of-range": ("eu-medium", dict(archive=lambda ds: _set(ds, "temp_2m", 80.0, point="hornsea-1")),
                                 "eu-medium: temp_2m outside [-90, 65]"),
    "missing-point": ("eu-wind", dict(archive=_drop_point,
                                      files=lambda f: [f.pop(k) for k in list(f) if "/paris" in k]),
                      "eu-wind: point paris missing"),
    "short-horizon": ("eu-short", dict(archive=lambda ds: ds.isel(lead_time=slice(0, 200))),
                      "eu-short: horizon 50.00 h < 72 h"),
    "null-in-json": ("japan", dict(files=_edit_json("japan/tokyo.json",
                                                    lambda o: o["srf"][5].update(temp=None))),
                     "japan: japan/tokyo.json: 1 null value(s) in srf (first: temp"),
    "short-json": ("eu-short", dict(files=_edit_json("eu-short/1H/paris.json",
                                                     lambda o: o["data"].pop())),
                   "eu-short/1H/paris.json: 71 entries, the 72 h horizon at 1H needs 72"),
    "invalid-json": ("eu-wind", dict(files=lambda f: f.update({"eu-wind/1H/paris.json": b'{"data": ['})),
                     "eu-wind/1H/paris.json is not valid JSON"),
    "ladder-lacks-an-element": ("eu-wind", dict(files=_edit_json("eu-wind/30min/paris.json", lambda o: o.pop("windir"))),
                                "eu-wind/30min/paris.json is not a ladder object"),
    "short-and-medium-disagree": ("eu-medium", dict(archive=lambda ds: _set(ds, "pressure_sfc", 1000.0)),
                                  "eu-short pressure_sfc and eu-medium pressure_sfc disagree"),
    "windpack-10m-disagrees": ("eu-wind", dict(archive=lambda ds: _set(ds, "windspd", 3.0, height=10.0)),
                               "eu-short windspd_10m and eu-wind windspd disagree"),
    # The JSON files against the contract (pointcast.contract): elements, order, types, ranges, codes.
    "renamed-element": ("eu-short", dict(files=_edit_json("eu-short/1H/paris.json", lambda o: o["data"].__setitem__(
        slice(None), [{("rh" if k == "humidity" else k): v for k, v in e.items()} for e in o["data"]]))),
                        "eu-short/1H/paris.json: data entry keys"),
    "changed-unit": ("eu-medium", dict(files=_edit_json("eu-medium/1H/paris.json",
                                                       lambda o: o["unit"].update(temp_2m="K"))),
                     "eu-medium/1H/paris.json: unit"),
    "json-value-out-of-range": ("eu-wind", dict(files=_edit_json("eu-wind/1H/paris.json",
                                                                 lambda o: o["windir"][5].__setitem__(3, 400.0))),
                                "eu-wind/1H/paris.json: data windir: [400.0] outside [0.0, 360.0]"),
    "unknown-wx-code": ("japan", dict(files=_edit_json("japan/tokyo.json", lambda o: o["srf"][2].update(wx=600))),
                        "japan/tokyo.json: srf wx: [600] not among its codes"),
    "integer-element-as-float": ("japan", dict(files=_edit_json("japan/tokyo.json",
                                                                lambda o: o["mrf"][1].update(pop=12.5))),
                                 "japan/tokyo.json: mrf pop: values of type ['float'], not integer"),
    "daily-extreme-off-its-hours": ("japan", dict(files=_edit_json("japan/sapporo.json",
                                                                   lambda o: o["mrf"][1].update(maxtemp=50.0))),
                                    "japan/sapporo.json: mrf"),
}


def test_the_real_run_passes(real):
    cfg, outputs, _ = real
    report = validate(outputs, cfg)
    assert report["ok"] is True and report["errors"] == []
    assert report["products"]["eu-short"] == {"points": 2, "lead_times": 288, "variables": 32, "files": 7}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_each_corruption_is_refused_with_its_reason(real, name):
    cfg, outputs, _ = real
    pid, how, reason = CORRUPTIONS[name]
    report = validate(_corrupt(outputs, pid, **how), cfg)
    assert report["ok"] is False
    assert any(reason in e for e in report["errors"]), report["errors"]
    assert validate(outputs, cfg)["ok"] is True  # the original outputs were not touched


def test_a_range_with_one_bound_is_checked_on_that_side(real):
    cfg, outputs, _ = real

    def lower_bound_only(least):
        def edit(ds):
            del ds["temp_2m"].attrs["valid_max"]
            ds["temp_2m"].attrs["valid_min"] = least
            return ds
        return edit

    assert validate(_corrupt(outputs, "eu-medium", archive=lower_bound_only(-90.0)), cfg)["ok"] is True
    report = validate(_corrupt(outputs, "eu-medium", archive=lower_bound_only(60.0)), cfg)
    assert any("eu-medium: temp_2m outside [60.0, None]" in e for e in report["errors"]), report["errors"]


def test_a_null_is_found_in_any_staged_file(tmp_path):
    """Files are parsed in a spread of PARSED_FILES, but a null anywhere is refused. As the
    cycle builds them: two slices write their points' files into the staging tree, each
    finds its own `FileFacts` (the null, a missing file), and the run's mapping adopts their
    names."""
    from pointcast.facts import PARSED_FILES, FileFacts
    from pointcast.publish import TreeWriter
    from pointcast.validate import _files, file_facts

    (tmp_path / "staging").mkdir()
    def entry(table, **values):  # the contract's elements, each at its lowest valid value (or first code)
        return {e.name: values.get(e.ref, "d" if e.type == "date-time" else e.codes[0] if e.codes else
                                   int(e.valid[0]) if e.type == "integer" else float(e.valid[0])) for e in table}

    run = TreeWriter(tmp_path / "staging", "gzip")
    staged, found = run.files(), []
    for first in (0, 3 * PARSED_FILES):
        writer = TreeWriter(tmp_path / "staging", "gzip", threads=0)
        files = writer.files()
        for i in range(first, first + 3 * PARSED_FILES):
            values = [1.5, None] if i == 902 else [1.5, 2.5]
            files[f"japan/p{i:04d}.json"] = json.dumps(
                {"lat": 35.0, "lon": 139.0, "srf": [entry(contract.JAPAN_SRF, temp=v) for v in values],
                 "mrf": [entry(contract.JAPAN_MRF)]}).encode()
        found.append(file_facts(files, [f"japan/p{i:04d}.json" for i in range(first, first + 3 * PARSED_FILES + 1)]))
        staged.adopt(files.written(), writer.close())
    assert [f.with_null for f in found] == [[], ["japan/p0902.json"]]
    assert [f.missing for f in found] == [["japan/p0600.json"], ["japan/p1200.json"]]
    assert found[0].missing[0] in staged  # the next slice wrote it
    facts = FileFacts.merged(found)
    assert len(facts.spread) == PARSED_FILES and facts.spread[0] == "japan/p0000.json"
    assert facts.spread[-1] == "japan/p1199.json"
    assert _files("japan", staged, facts, 72) == ["japan: japan/p0902.json: 1 null value(s) in srf (first: temp at d)"]
    staged["japan/index.json"] = b"{}"
    assert len(staged) == 1201 and list(staged)[:2] == ["japan/index.json", "japan/p0000.json"]
    assert "japan/p1199.json" in staged and "japan/p1200.json" not in staged and "japan/p119" not in staged
    assert json.loads(staged["japan/p0902.json"])["srf"][1]["temp"] is None
    run.finish()
    assert sorted(p.name for p in (tmp_path / "staging" / "json" / "japan").iterdir())[-1] == "p1199.json.gz"


def test_a_nan_in_one_slice_fails_the_staged_run(real, tmp_path):
    """The real eu-short archive written into a staged store slice by slice (a point each),
    as the build slices write it: the staged run passes as the whole one did, and a NaN in
    the second slice's rows, found by that slice alone, fails it, naming where it is."""
    from dataclasses import replace

    from pointcast.facts import ArchiveFacts
    from pointcast.publish import ArchiveStage, write_region
    from pointcast.validate import archive_facts

    cfg, outputs, _ = real
    whole = outputs["eu-short"].archive
    for broken in (False, True):
        staging = tmp_path / f"staging-{broken}"
        staging.mkdir()
        stage = ArchiveStage(staging)
        stage.create("eu-short", whole.isel(point=[0]), list(whole.point.values), 1)
        facts = []
        for i in range(whole.sizes["point"]):
            rows = whole.isel(point=[i]).copy(deep=True)
            if broken and i == 1:
                rows["temp_2m"][0, 0, 7] = np.nan
            write_region(staging, "eu-short", rows, slice(i, i + 1))
            facts.append(archive_facts(rows))
        staged = replace(outputs["eu-short"], archive=stage.dataset("eu-short"),
                         facts=ArchiveFacts.merged(facts))
        report = validate({**outputs, "eu-short": staged}, cfg)
        if broken:
            point, lead = whole.point.values[1], whole.lead_time.values[7]
            assert report["ok"] is False
            assert f"eu-short: temp_2m has 1 NaN (first at point {point}, lead_time {lead})" in report["errors"]
        else:
            assert report == validate(outputs, cfg) and report["ok"] is True


def test_the_agreement_sample_is_read_chunk_by_chunk_in_the_points_order(real, tmp_path):
    """The real eu-short archive staged in reverse point order, a point a chunk (as slices of
    one): read a chunk at a time, its sample lines up with the medium range's point by point,
    so it agrees as the whole one does, and one point changed shows by exactly its change."""
    from dataclasses import replace

    from pointcast.facts import ArchiveFacts
    from pointcast.publish import ArchiveStage, write_region
    from pointcast.validate import archive_facts

    cfg, outputs, _ = real
    whole = outputs["eu-short"].archive
    backwards = whole.isel(point=slice(None, None, -1))
    n = backwards.sizes["point"]
    assert n >= 2
    for change in (0.0, 5.0):
        staging = tmp_path / f"staging-{change}"
        staging.mkdir()
        stage = ArchiveStage(staging)
        stage.create("eu-short", backwards.isel(point=[0]), list(backwards.point.values), 1)
        facts = []
        for i in range(n):
            rows = backwards.isel(point=[i]).copy(deep=True)
            if i == 1:
                rows["pressure_sfc"][0, 0, :] += change
            write_region(staging, "eu-short", rows, slice(i, i + 1))
            facts.append(archive_facts(rows))
        staged = replace(outputs["eu-short"], archive=stage.dataset("eu-short"),
                         facts=ArchiveFacts.merged(facts))
        assert staged.archive["pressure_sfc"].encoding["preferred_chunks"]["point"] == 1
        report = validate({**outputs, "eu-short": staged}, cfg)
        if change:
            assert report["errors"] == ["eu-short pressure_sfc and eu-medium pressure_sfc disagree by up to "
                                        "5.000 over their common lead times"]
        else:
            assert report == validate(outputs, cfg) and report["ok"] is True


def test_failed_run_is_kept_aside_with_its_reasons_and_not_served(real, tmp_path, caplog, monkeypatch):
    """A real cycle one of whose build slices writes a NaN into its eu-short archive rows."""
    import pointcast.flows.cycle as flow
    from pointcast import build

    _, _, world = real
    cfg = world.fresh(tmp_path / "t")
    # Built in this process, where the patch below is (a build process imports its own build).
    cfg.write_text(cfg.read_text().replace("workers = 2\n", "workers = 2\nbuild_processes = 1\n", 1))
    root = cfg.parent / "output"
    reason = CORRUPTIONS["nan"][2]
    original = build.build_product

    def with_nan(cfg, pid, series, ctx, files):
        out = original(cfg, pid, series, ctx, files)
        if pid == "eu-short" and "paris" in out.archive.point.values:
            out.archive["temp_2m"].loc[{"point": "paris", "lead_time": out.archive.lead_time.values[40]}] = np.nan
        return out

    monkeypatch.setattr(build, "build_product", with_nan)
    with caplog.at_level(logging.INFO):
        state = flow.cycle(str(cfg), return_state=True)
    assert state.is_failed() and "failed validation" in str(state.message)
    assert served_run(root) == world.run_a
    kept, = (root / "runs" / "failed").iterdir()  # run B, its id of this configuration
    report = json.loads((kept / "validation.json").read_text())
    assert report["ok"] is False and any(reason in e for e in report["errors"])
    assert (kept / "json" / "eu-short" / "1H" / "paris.json").is_file()
    assert f"validation: {reason}" in caplog.text
    assert not (root / "runs" / kept.name).exists()
    assert all(len(v) == 1 for v in archived(root).values())  # a refused run is not archived
    assert not (kept / "archive").exists()  # nor are its staged archives kept
