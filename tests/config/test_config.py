"""Configuration loading: the shipped config, defaults, and every rejection with file:line: key."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pointcast import grids
from pointcast.config import (
    FREQS,
    Config,
    ConfigError,
    Point,
    load_config,
    load_points,
    parse_init,
    utc_time,
)

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "config" / "pointcast.toml"


@pytest.fixture(autouse=True, scope="module")
def _memory_only_cache():
    """Keep the coverage raster in memory only (no writes under output/ from the tests)."""
    saved = grids.raster._cache_dir, grids.raster._cache_dir_explicit
    grids.set_cache_dir(None)
    yield
    grids.raster._cache_dir, grids.raster._cache_dir_explicit = saved


BASE = """\
[output]
root = "out"
keep_runs = 8

[schedule]
every_hours = 3
offset_minutes = 0

[dask]
scheduler = "threads"
workers = 2

[sources.sample]
type = "sample"
scale = 4
area = [-25.0, 30.0, 45.0, 72.0]
init = "latest"

[models.ifs]
source = "sample"
[models.icon-eu]
source = "sample"

[products.eu-medium]
points = "points.csv"
models = ["icon-eu", "ifs"]
freqs = ["1H", "30min", "15min"]
horizon_hours = 336
"""

POINTS = """\
id,name,lat,lon,elevation,hub_heights
paris,Paris,48.8566,2.3522,35,
hornsea-1,Hornsea 1,53.8850,1.7910,0,113
"""


def line_of(text: str, needle: str) -> int:
    for n, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in text")


def write(tmp_path: Path, toml: str = BASE, points: str | None = POINTS) -> Path:
    cfg = tmp_path / "pointcast.toml"
    cfg.write_text(toml, encoding="utf-8")
    if points is not None:
        (tmp_path / "points.csv").write_text(points, encoding="utf-8")
    return cfg


def expect_error(path: Path, line: int, key: str, reason: str = "", file: Path | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    err = ei.value
    prefix = f"{file or path}:{line}: {key}: "
    assert str(err).startswith(prefix), f"{str(err)!r} does not start with {prefix!r}"
    assert reason in err.reason, f"{reason!r} not in {err.reason!r}"
    assert (err.file, err.line, err.key) == (str(file or path), line, key)
    return err


# --- the shipped configuration ---------------------------------------------------------------


def test_shipped_config_loads():
    cfg = load_config(SHIPPED)
    assert isinstance(cfg, Config)
    assert cfg.path == SHIPPED
    assert cfg.output.root == REPO / "output"
    assert cfg.output.keep_runs == 8
    assert (cfg.schedule.every_hours, cfg.schedule.offset_minutes) == (3, 0)
    assert (cfg.dask.scheduler, cfg.dask.workers) == ("threads", 2)
    sample = cfg.sources["sample"]
    assert sample.type == "sample"
    assert {k: sample.options[k] for k in ("scale", "area", "init")} == {
        "scale": 4, "area": (-180.0, -66.0, 180.0, 90.0), "init": "latest"}
    assert set(cfg.models) == {"ifs", "gfs", "icon-eu", "icon-d2", "msm", "ens", "icon-eu-eps", "gefs"}
    assert {pid: pc.ensembles for pid, pc in cfg.products.items()} == {
        "eu-medium": ("icon-eu-eps", "ens"), "eu-short": ("icon-eu-eps", "ens"), "eu-wind": ("icon-eu-eps", "ens"),
        "global": ("gefs", "ens"), "japan": ("ens",)}
    assert all(m.source == "sample" for m in cfg.models.values())
    assert set(cfg.products) == {"eu-medium", "eu-short", "eu-wind", "global", "japan"}
    glob = cfg.products["global"]
    assert glob.models == ("gfs", "ifs") and glob.max_lead_hours == (("gfs", 120),)
    assert glob.horizon_hours >= 338 and glob.freqs == ("1H",)
    med, short = cfg.products["eu-medium"], cfg.products["eu-short"]
    assert med.horizon_hours == 336 and short.horizon_hours == 72
    assert med.models == short.models == ("icon-d2", "icon-eu", "ifs")
    assert med.freqs == short.freqs == FREQS
    assert med.points_file == REPO / "config" / "points" / "europe.csv"
    assert cfg.source_for("ifs") is sample


def test_shipped_points():
    cfg = load_config(SHIPPED)
    pts = cfg.products["eu-medium"].points
    assert 30 <= len(pts) <= 40
    ids = [p.id for p in pts]
    assert len(set(ids)) == len(ids)
    by_id = {p.id: p for p in pts}
    for city in ("london", "paris", "berlin", "madrid", "rome", "vienna", "warsaw", "stockholm", "oslo",
                 "copenhagen", "amsterdam", "brussels", "zurich", "munich", "frankfurt", "hamburg",
                 "prague", "lisbon", "dublin", "helsinki", "athens"):
        assert city in by_id, city
    offshore = ("hornsea-1", "dogger-bank-a", "borssele", "gemini", "horns-rev-3", "kriegers-flak",
                "walney-extension", "hollandse-kust-zuid")
    for wf in offshore:
        assert by_id[wf].elevation == 0 and by_id[wf].hub_heights, wf
    for wf in ("whitelee", "fantanele-cogealac", "markbygden"):
        assert by_id[wf].hub_heights and by_id[wf].elevation > 0, wf
    assert by_id["zugspitze"].elevation > 2900
    assert all(p.elevation is not None for p in pts)
    assert all(grids.EUROPE_2KM.covers(p.lat, p.lon) for p in pts)
    # coordinates are given with 4 decimals
    text = (REPO / "config" / "points" / "europe.csv").read_text(encoding="utf-8")
    for line in text.splitlines()[1:]:
        if line and not line.startswith("#"):
            lat, lon = line.split(",")[2:4]
            assert len(lat.split(".")[1]) == 4 and len(lon.split(".")[1]) == 4, line
    # one shared, parsed points tuple for both products
    assert cfg.products["eu-short"].points == pts


JAPAN_POINTS = REPO / "config" / "points" / "japan.csv"


def test_shipped_japan_points():
    pts = load_points(JAPAN_POINTS)
    assert 20 <= len(pts) <= 30
    ids = [p.id for p in pts]
    assert len(set(ids)) == len(ids)
    by_id = {p.id: p for p in pts}
    for city in ("tokyo", "osaka", "nagoya", "sapporo", "fukuoka", "sendai", "hiroshima", "naha", "kyoto",
                 "kobe", "yokohama", "niigata", "kanazawa", "kagoshima", "matsuyama", "nagano", "hakodate",
                 "asahikawa", "fujiyoshida", "karuizawa"):
        assert city in by_id, city
    assert by_id["fuji-summit"].elevation > 3700
    assert by_id["karuizawa"].elevation > 900 and by_id["fujiyoshida"].elevation > 700
    assert all(p.elevation is not None and not p.hub_heights for p in pts)
    assert all(grids.JAPAN_1KM.covers(p.lat, p.lon) for p in pts)
    assert not any(grids.EUROPE_2KM.covers(p.lat, p.lon) for p in pts)
    for line in JAPAN_POINTS.read_text(encoding="utf-8").splitlines()[1:]:
        if line and not line.startswith("#"):
            lat, lon = line.split(",")[2:4]
            assert len(lat.split(".")[1]) == 4 and len(lon.split(".")[1]) == 4, line
    cfg = load_config(SHIPPED)
    if "japan" in cfg.products:
        assert cfg.products["japan"].points == pts


JAPAN_TOML = BASE + f"""
[products.japan]
points = "{JAPAN_POINTS.as_posix()}"
models = ["ifs"]
horizon_hours = 240
"""


def test_japan_product_accepted(tmp_path):
    cfg = load_config(write(tmp_path, JAPAN_TOML))
    jp = cfg.products["japan"]
    assert jp.points == load_points(JAPAN_POINTS)
    assert jp.points_file == JAPAN_POINTS
    assert jp.freqs == ("1H",)  # hourly srf; mrf days are made from it
    assert jp.horizon_hours == 240
    assert grids.grid_for("japan") is grids.JAPAN_1KM


def test_japan_product_freqs(tmp_path):
    toml = JAPAN_TOML.replace("horizon_hours = 240", 'horizon_hours = 240\nfreqs = ["1H"]')
    assert load_config(write(tmp_path, toml)).products["japan"].freqs == ("1H",)
    toml = JAPAN_TOML.replace("horizon_hours = 240", 'horizon_hours = 240\nfreqs = ["1H", "30min"]')
    expect_error(write(tmp_path, toml), line_of(toml, 'freqs = ["1H", "30min"]'), "products.japan.freqs",
                 "freq '30min' is not available (allowed: 1H)")


def test_japan_product_rejects_points_outside_japan(tmp_path):
    # points.csv holds Paris and Hornsea: fine for eu-medium, outside Japan
    toml = JAPAN_TOML.replace(JAPAN_POINTS.as_posix(), "points.csv")
    expect_error(write(tmp_path, toml), 2, "lat,lon",
                 "point 'paris' (48.8566, 2.3522) is outside the coverage of product japan (Japan:",
                 file=tmp_path / "points.csv")
    only_japan = BASE.split("[products.eu-medium]")[0] + (
        '[products.japan]\npoints = "points.csv"\nmodels = ["ifs"]\nhorizon_hours = 240\n'
    )
    points = HEADER + "tokyo,Tokyo,35.6812,139.7671,4,\nseoul,Seoul,37.5665,126.9780,38,\n"
    expect_error(write(tmp_path, only_japan, points), 3, "lat,lon",
                 "point 'seoul' (37.5665, 126.978) is outside the coverage of product japan",
                 file=tmp_path / "points.csv")


def test_japan_points_rejected_by_european_product(tmp_path):
    path = write(tmp_path, points=POINTS + "tokyo,Tokyo,35.6812,139.7671,4,\n")
    expect_error(path, 4, "lat,lon", "point 'tokyo' (35.6812, 139.767) is outside the coverage of product eu-medium",
                 file=tmp_path / "points.csv")


# --- defaults and accepted forms ---------------------------------------------------------------------


def test_defaults(tmp_path):
    toml = """\
[output]
root = "out"

[sources.s]
type = "sample"

[models.ifs]
source = "s"

[products.eu-short]
points = "points.csv"
models = ["ifs"]
horizon_hours = 72
"""
    cfg = load_config(write(tmp_path, toml))
    assert cfg.output.root == tmp_path / "out"
    assert cfg.output.keep_runs == 8
    assert (cfg.schedule.every_hours, cfg.schedule.offset_minutes) == (3, 0)
    assert (cfg.dask.scheduler, cfg.dask.workers) == ("threads", 2)
    assert (cfg.dask.points_per_slice, cfg.dask.build_processes) == (500, len(os.sched_getaffinity(0)))
    assert cfg.products["eu-short"].freqs == ("1H", "30min", "15min")
    assert cfg.sources["s"].options == {"scale": 1, "area": None, "init": "latest", "icon_layout": "v1"}
    assert cfg.products["eu-short"].points == (
        Point("paris", "Paris", 48.8566, 2.3522, 35.0, ()),
        Point("hornsea-1", "Hornsea 1", 53.885, 1.791, 0.0, (113.0,)),
    )


def test_relative_config_path_and_csv_name(tmp_path, monkeypatch):
    write(tmp_path, points=POINTS + "nyc,New York,40.7128,-74.0060,10,\n")
    monkeypatch.chdir(tmp_path.parent)
    rel = Path(tmp_path.name) / "pointcast.toml"
    expect_error(rel, 4, "lat,lon", "outside the coverage of product eu-medium",
                 file=Path(tmp_path.name) / "points.csv")


@pytest.mark.parametrize(
    "value,expected",
    [
        ('"2026-11-22T00:00Z"', datetime(2026, 11, 22, 0, 0, tzinfo=UTC)),
        ('"2026-11-22T06:00:00+01:00"', datetime(2026, 11, 22, 5, 0, tzinfo=UTC)),
        ('"2026-11-22T12:00"', datetime(2026, 11, 22, 12, 0, tzinfo=UTC)),
        ("2026-11-22T18:00:00Z", datetime(2026, 11, 22, 18, 0, tzinfo=UTC)),  # TOML datetime
    ],
)
def test_sample_init_iso(tmp_path, value, expected):
    cfg = load_config(write(tmp_path, BASE.replace('init = "latest"', f"init = {value}")))
    init = cfg.sources["sample"].options["init"]
    assert init == expected and init.utcoffset().total_seconds() == 0


def test_other_source_types_keep_their_options(tmp_path):
    toml = BASE + '\n[sources.ecmwf]\ntype = "ecmwf-open-data"\nurl = "https://example.org"\nmirrors = 2\n'
    cfg = load_config(write(tmp_path, toml))
    src = cfg.sources["ecmwf"]
    assert src.type == "ecmwf-open-data"
    assert src.options == {"url": "https://example.org", "mirrors": 2}


def test_dask_tcp_scheduler_accepted(tmp_path):
    cfg = load_config(write(tmp_path, BASE.replace('"threads"', '"tcp://10.0.0.5:8786"')))
    assert cfg.dask.scheduler == "tcp://10.0.0.5:8786"


def test_points_csv_comments_blank_lines_and_quotes(tmp_path):
    csv_text = (
        "# my points\n"
        "id,name,lat,lon,elevation,hub_heights\n"
        "\n"
        "# cities\n"
        'paris,"Paris, France",48.8566,2.3522,,\n'
        "hornsea-1,Hornsea 1,53.8850,1.7910,0, 150 ; 100 \n"
        "bad,Bad,95,0,,\n"
    )
    cfg_path = write(tmp_path, points=csv_text)
    expect_error(cfg_path, 7, "lat", "outside [-90, 90]", file=tmp_path / "points.csv")
    (tmp_path / "points.csv").write_text(csv_text.rsplit("bad", 1)[0], encoding="utf-8")
    pts = load_config(cfg_path).products["eu-medium"].points
    assert pts[0].name == "Paris, France" and pts[0].elevation is None and pts[0].hub_heights == ()
    assert pts[1].hub_heights == (100.0, 150.0)
    assert load_points(tmp_path / "points.csv") == pts


def test_quoted_and_dotted_keys_are_located(tmp_path):
    toml = BASE.replace("[products.eu-medium]", '[products."eu-medium"]').replace(
        "[models.ifs]\nsource = \"sample\"", "[models]\nifs.source = \"sample\"\nifs.colour = 1"
    )
    path = write(tmp_path, toml)
    expect_error(path, line_of(toml, "ifs.colour"), "models.ifs.colour", "unknown key")


def test_multiline_array_and_strings(tmp_path):
    toml = BASE.replace('models = ["icon-eu", "ifs"]', 'models = [\n  "icon-eu",\n  "gfs",\n]').replace(
        "[output]\n", '[output]\n# a comment with key = value\n'
    )
    # a multi-line string whose text looks like TOML must not be taken for keys or headers
    toml = toml.replace(
        "[models.ifs]",
        '[sources.other]\ntype = "x"\nnote = """\n[products.eu-medium]\nmodels = 1\n"""\n\n[models.ifs]',
    )
    path = write(tmp_path, toml)
    expect_error(path, line_of(toml, "models = ["), "products.eu-medium.models", "'gfs' is not defined")


# --- rejections: the TOML ---------------------------------------------------------------------------


def test_unreadable_file(tmp_path):
    missing = tmp_path / "nope.toml"
    expect_error(missing, 1, "file", "cannot read")


def test_invalid_toml(tmp_path):
    toml = BASE.replace("keep_runs = 8", "keep_runs = ")
    path = write(tmp_path, toml)
    err = expect_error(path, line_of(toml, "keep_runs"), "toml", "invalid TOML")
    assert "line 3" in err.reason


def test_duplicate_toml_key(tmp_path):
    toml = BASE.replace("keep_runs = 8", "keep_runs = 8\nkeep_runs = 9")
    path = write(tmp_path, toml)
    expect_error(path, 4, "toml", "invalid TOML")


@pytest.mark.parametrize(
    "old,new,needle,key,reason",
    [
        # unknown tables and keys, anywhere
        ("[dask]", "[logging]\nlevel = 1\n\n[dask]", "[logging]", "logging", "unknown table"),
        ("keep_runs = 8", "keep_runs = 8\ncolour = 1", "colour", "output.colour", "unknown key"),
        ("every_hours = 3", "every_hours = 3\ncron = \"x\"", "cron", "schedule.cron", "unknown key"),
        ("workers = 2", "workers = 2\nthreads = 4", "threads = 4", "dask.threads", "unknown key"),
        ('init = "latest"', 'init = "latest"\nseed = 1', "seed", "sources.sample.seed", "unknown key"),
        ('[models.icon-eu]\nsource = "sample"', '[models.icon-eu]\nsource = "sample"\npriority = 1',
         "priority", "models.icon-eu.priority", "unknown key"),
        ("horizon_hours = 336", "horizon_hours = 336\nhubs = [10]", "hubs", "products.eu-medium.hubs",
         "unknown key"),
        # wrong types (bool is not int)
        ("keep_runs = 8", "keep_runs = true", "keep_runs", "output.keep_runs", "expected an integer, got a boolean"),
        ("horizon_hours = 336", "horizon_hours = 336.0", "horizon_hours", "products.eu-medium.horizon_hours",
         "expected an integer, got a float"),
        ('root = "out"', "root = 5", "root", "output.root", "expected a string"),
        ('models = ["icon-eu", "ifs"]', 'models = "ifs"', "models =", "products.eu-medium.models",
         "expected an array"),
        ('models = ["icon-eu", "ifs"]', 'models = ["ifs", 3]', "models =", "products.eu-medium.models",
         "expected an array of strings"),
        ("workers = 2", 'workers = "2"', "workers", "dask.workers", "expected an integer"),
        ("offset_minutes = 0", "offset_minutes = false", "offset_minutes", "schedule.offset_minutes",
         "expected an integer"),
        ('[products.eu-medium]\n', "[products]\neu-medium = 3\n[products.x]\n", "eu-medium = 3",
         "products.eu-medium", "expected a table"),
        # values
        ("keep_runs = 8", "keep_runs = 0", "keep_runs", "output.keep_runs", "must be >= 1"),
        ("every_hours = 3", "every_hours = 5", "every_hours", "schedule.every_hours", "must divide 24"),
        ("offset_minutes = 0", "offset_minutes = 180", "offset_minutes", "schedule.offset_minutes",
         "must be <= 179"),
        ('scheduler = "threads"', 'scheduler = "mpi"', "scheduler", "dask.scheduler", "expected one of"),
        ("workers = 2", "workers = 0", "workers", "dask.workers", "must be >= 1"),
        ("workers = 2", "workers = 2\nbuild_processes = 0", "build_processes", "dask.build_processes",
         "must be >= 1"),
        ('freqs = ["1H", "30min", "15min"]', 'freqs = ["1H", "5min"]', "freqs", "products.eu-medium.freqs",
         "unknown freq '5min'"),
        ('freqs = ["1H", "30min", "15min"]', "freqs = []", "freqs", "products.eu-medium.freqs", "must not be empty"),
        ('freqs = ["1H", "30min", "15min"]', 'freqs = ["1H", "1H"]', "freqs", "products.eu-medium.freqs",
         "listed twice"),
        ("horizon_hours = 336", "horizon_hours = 0", "horizon_hours", "products.eu-medium.horizon_hours",
         "must be >= 1"),
        ("horizon_hours = 336", "horizon_hours = -72", "horizon_hours", "products.eu-medium.horizon_hours",
         "must be >= 1"),
        # cross references
        ('models = ["icon-eu", "ifs"]', 'models = ["icon-d2", "ifs"]', "models =", "products.eu-medium.models",
         "model 'icon-d2' is not defined in [models]"),
        ('[models.ifs]\nsource = "sample"', '[models.ifs]\nsource = "ecmwf"', 'source = "ecmwf"',
         "models.ifs.source", "source 'ecmwf' is not defined in [sources]"),
        ("[products.eu-medium]", "[products.eu-long]", "[products.eu-long]", "products.eu-long",
         "unknown product"),
        ("horizon_hours = 336", "horizon_hours = 336\nmax_lead_hours = { ifs = 120 }", "max_lead_hours",
         "products.eu-medium.max_lead_hours.ifs", "other than its last one can be limited"),
        ("horizon_hours = 336", "horizon_hours = 336\nmax_lead_hours = { icon-eu = 0 }", "max_lead_hours",
         "products.eu-medium.max_lead_hours.icon-eu", "must be >= 1"),
        ("horizon_hours = 336", "horizon_hours = 336\nmax_lead_hours = 120", "max_lead_hours",
         "products.eu-medium.max_lead_hours", "expected a table"),
        ('points = "points.csv"', 'points = "missing.csv"', "points =", "products.eu-medium.points",
         "points file not found"),
        # the sample source
        ("scale = 4", "scale = 0", "scale", "sources.sample.scale", "must be >= 1"),
        ("scale = 4", "scale = true", "scale", "sources.sample.scale", "expected an integer, got a boolean"),
        ("scale = 4", "scale = 2.5", "scale", "sources.sample.scale", "expected an integer, got a float"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [-25.0, 30.0, 45.0]", "area", "sources.sample.area",
         "expected 4 numbers"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", 'area = [-25.0, 30.0, 45.0, "72"]', "area", "sources.sample.area",
         "expected 4 numbers"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [-25.0, 30.0, 45.0, true]", "area", "sources.sample.area",
         "expected 4 numbers"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [45.0, 30.0, -25.0, 72.0]", "area", "sources.sample.area",
         "west (45) must be less than east (-25)"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [-25.0, 72.0, 45.0, 30.0]", "area", "sources.sample.area",
         "south (72) must be less than north (30)"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [-25.0, 30.0, 400.0, 72.0]", "area", "sources.sample.area",
         "within -180..360"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [-25.0, -95.0, 45.0, 72.0]", "area", "sources.sample.area",
         "within -90..90"),
        ("area = [-25.0, 30.0, 45.0, 72.0]", "area = [-25.0, 30.0, 45.0, nan]", "area", "sources.sample.area",
         "finite"),
        ('init = "latest"', 'init = "yesterday"', "init", "sources.sample.init", "ISO 8601"),
        ('init = "latest"', "init = 6", "init", "sources.sample.init", "ISO 8601"),
        ('init = "latest"', 'init = "latest"\noutage = ["2026-11-20T06:00Z", "2026-11-20T00:00Z"]', "outage",
         "sources.sample.outage", "must be before the end"),
        ('init = "latest"', 'init = "latest"\noutage = ["2026-11-20T06:00Z"]', "outage", "sources.sample.outage",
         "expected two ISO 8601 times"),
        ('type = "sample"', "type = 1", "type =", "sources.sample.type", "expected a string"),
        ('type = "sample"', 'type = ""', "type =", "sources.sample.type", "must not be empty"),
    ],
)
def test_toml_rejections(tmp_path, old, new, needle, key, reason):
    assert old in BASE
    toml = BASE.replace(old, new, 1)
    path = write(tmp_path, toml)
    expect_error(path, line_of(toml, needle), key, reason)


@pytest.mark.parametrize(
    "table,key,header_needle",
    [
        ("horizon_hours = 336\n", "products.eu-medium.horizon_hours", "[products.eu-medium]"),
        ('points = "points.csv"\n', "products.eu-medium.points", "[products.eu-medium]"),
        ('models = ["icon-eu", "ifs"]\n', "products.eu-medium.models", "[products.eu-medium]"),
        ('root = "out"\n', "output.root", "[output]"),
        ('type = "sample"\n', "sources.sample.type", "[sources.sample]"),
    ],
)
def test_missing_required_key(tmp_path, table, key, header_needle):
    toml = BASE.replace(table, "", 1)
    path = write(tmp_path, toml)
    expect_error(path, line_of(toml, header_needle), key, "missing required key")


def test_missing_model_source(tmp_path):
    toml = BASE.replace('[models.ifs]\nsource = "sample"\n', "[models.ifs]\n")
    path = write(tmp_path, toml)
    expect_error(path, line_of(toml, "[models.ifs]"), "models.ifs.source", "missing required key")


@pytest.mark.parametrize("table", ["output", "sources", "models", "products"])
def test_missing_required_table(tmp_path, table):
    # drop every line of that table
    kept, skip = [], False
    for line in BASE.splitlines():
        if line.startswith("["):
            skip = line.strip("[]").split(".")[0] == table
        if not skip:
            kept.append(line)
    toml = "\n".join(kept) + "\n"
    if table == "sources":
        toml = toml.replace('source = "sample"', 'source = "x"')
    path = write(tmp_path, toml)
    expect_error(path, 1, table, "missing required table")


# --- rejections: the points CSV -----------------------------------------------------------------------

HEADER = "id,name,lat,lon,elevation,hub_heights\n"


@pytest.mark.parametrize(
    "csv_text,line,key,reason",
    [
        ("id,name,lat,lon,elevation\nparis,Paris,48.8566,2.3522,35\n", 1, "hub_heights", "missing column"),
        ("id,name,lat,lon,elevation,hub_heights,country\nparis,Paris,48.8566,2.3522,35,,FR\n", 1, "country",
         "unknown column"),
        ("id,name,lat,lat,elevation,hub_heights\n", 1, "lat", "column appears twice"),
        ("", 1, "id", "empty points file"),
        (HEADER, 1, "id", "no points"),
        (HEADER + "paris,Paris,48.8566,2.3522,35\n", 2, "row", "expected 6 fields"),
        (HEADER + ",Nowhere,48.8566,2.3522,35,\n", 2, "id", "empty id"),
        (HEADER + "Paris,Paris,48.8566,2.3522,35,\n", 2, "id", "invalid id"),
        (HEADER + "paris/x,Paris,48.8566,2.3522,35,\n", 2, "id", "invalid id"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,\nlyon,Lyon,45.7640,4.8357,173,\nparis,P2,48.9,2.4,35,\n",
         4, "id", "duplicate id 'paris' (first on line 2)"),
        (HEADER + "paris,,48.8566,2.3522,35,\n", 2, "name", "empty name"),
        (HEADER + "paris,Paris,95.0,2.3522,35,\n", 2, "lat", "outside [-90, 90]"),
        (HEADER + "paris,Paris,-90.5,2.3522,35,\n", 2, "lat", "outside [-90, 90]"),
        (HEADER + "paris,Paris,48.8566,200,35,\n", 2, "lon", "outside [-180, 180]"),
        (HEADER + "paris,Paris,north,2.3522,35,\n", 2, "lat", "not a number"),
        (HEADER + "paris,Paris,,2.3522,35,\n", 2, "lat", "not a number"),
        (HEADER + "paris,Paris,nan,2.3522,35,\n", 2, "lat", "not a finite number"),
        (HEADER + "paris,Paris,48.8566,inf,35,\n", 2, "lon", "not a finite number"),
        (HEADER + "paris,Paris,48.8566,2.3522,high,\n", 2, "elevation", "not a number"),
        (HEADER + "paris,Paris,48.8566,2.3522,NaN,\n", 2, "elevation", "not a finite number"),
        (HEADER + "paris,Paris,48.8566,2.3522,12000,\n", 2, "elevation", "outside [-500, 9000]"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,5\n", 2, "hub_heights", "outside [10, 300]"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,100;350\n", 2, "hub_heights", "350 m outside [10, 300]"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,100;abc\n", 2, "hub_heights", "not a number"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,100;\n", 2, "hub_heights", "empty height"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,100;100\n", 2, "hub_heights", "listed twice"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,\nnyc,New York,40.7128,-74.0060,10,\n", 3, "lat,lon",
         "point 'nyc' (40.7128, -74.006) is outside the coverage of product eu-medium"),
        (HEADER + "paris,Paris,48.8566,2.3522,35,\natl,Mid-Atlantic,45.0,-30.0,0,\n", 3, "lat,lon",
         "outside the coverage"),
        (HEADER + 'paris,"Paris,48.8566,2.3522,35,\n', 2, "row", ""),
    ],
)
def test_csv_rejections(tmp_path, csv_text, line, key, reason):
    path = write(tmp_path, points=csv_text)
    expect_error(path, line, key, reason, file=tmp_path / "points.csv")


def test_csv_not_utf8(tmp_path):
    path = write(tmp_path, points=None)
    (tmp_path / "points.csv").write_bytes(HEADER.encode() + b"koln,K\xf6ln,50.9375,6.9603,53,\n")
    expect_error(path, 2, "file", "not UTF-8", file=tmp_path / "points.csv")


def test_points_in_subdirectory_named_relative_to_config(tmp_path):
    (tmp_path / "points").mkdir()
    (tmp_path / "points" / "eu.csv").write_text(HEADER + "paris,Paris,48.8566,2.3522,35,\nx,X,40.0,-74.0,0,\n")
    toml = BASE.replace('points = "points.csv"', 'points = "points/eu.csv"')
    path = write(tmp_path, toml, points=None)
    expect_error(path, 3, "lat,lon", "outside the coverage", file=tmp_path / "points" / "eu.csv")


def test_every_bad_row_of_a_points_csv_is_reported(tmp_path):
    """Several bad rows: one line each (file, line, first bad column), in the order of the file,
    and the good rows between them are not reported; the CLI prints them all."""
    import subprocess
    import sys

    csv_text = (HEADER + "paris,Paris,48.8566,2.3522,35,\n"  # line 2: good
                "lyon,Lyon,north,4.8357,173,\n"  # 3: lat
                "Bad Id,X,45.0,5.0,0,\n"  # 4: id
                "berlin,Berlin,52.52,13.405,34,\n"  # 5: good
                "rome,Rome,41.9028,12.4964,21,350\n"  # 6: hub_heights
                "paris,P2,48.9,2.4,35,\n"  # 7: duplicate id
                "short,Short,1.0\n")  # 8: row
    path = write(tmp_path, points=csv_text)
    err = expect_error(path, 3, "lat", "not a number: 'north'", file=tmp_path / "points.csv")
    shown = tmp_path / "points.csv"
    assert [(e.line, e.key) for e in err.others] == [(4, "id"), (6, "hub_heights"), (7, "id"), (8, "row")]
    lines = str(err).splitlines()
    assert len(lines) == 5 and all(line.startswith(f"{shown}:") for line in lines)
    assert lines[3] == f"{shown}:7: id: duplicate id 'paris' (first on line 2)"
    done = subprocess.run([sys.executable, "-m", "pointcast.cli", "check", "--config", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert all(f"{shown}:{n}: " in done.stderr for n in (3, 4, 6, 7, 8)), done.stderr


def test_every_point_outside_the_coverage_is_reported(tmp_path):
    points = POINTS + "nyc,New York,40.7128,-74.0060,10,\nparis-2,Paris bis,48.8567,2.3522,35,\n" \
                      "atl,Mid-Atlantic,45.0,-30.0,0,\n"
    err = expect_error(write(tmp_path, points=points), 4, "lat,lon", "point 'nyc'", file=tmp_path / "points.csv")
    assert [(e.line, e.key) for e in err.others] == [(5, "lat,lon"), (6, "lat,lon")]
    assert "same eu-medium grid cell" in err.others[0].reason and "'atl'" in err.others[1].reason


def test_config_error_message_format():
    err = ConfigError("a/b.toml", 7, "output.root", "expected a string")
    assert str(err) == err.message == "a/b.toml:7: output.root: expected a string"
    assert isinstance(err, Exception)


def test_config_error_pickles():
    import pickle

    err = pickle.loads(pickle.dumps(ConfigError("x.csv", 3, "lat", "not a number: 'a'")))
    assert str(err) == "x.csv:3: lat: not a number: 'a'" and err.line == 3
    both = pickle.loads(pickle.dumps(ConfigError.of_all([err, ConfigError("x.csv", 5, "id", "empty id")])))
    assert str(both) == "x.csv:3: lat: not a number: 'a'\nx.csv:5: id: empty id" and both.others[0].line == 5


def test_two_points_in_one_product_cell_are_refused(tmp_path):
    """A point 11 m from Paris lies in Paris's 2 km cell: it would never be served."""
    points = POINTS + "paris-2,Paris bis,48.8567,2.3522,35,120\n"
    key = grids.grid_for("eu-medium").cell_key(48.8566, 2.3522)
    expect_error(write(tmp_path, points=points), 4, "lat,lon",
                 f"point 'paris-2' is in the same eu-medium grid cell {key} as point 'paris' (line 2)",
                 file=tmp_path / "points.csv")


def test_times_are_read_one_way():
    """The configuration, the CLI, observation files and the served run tree read times alike:
    without a zone they are UTC, with an offset they are converted to UTC."""
    from pointcast.cli import _utc_time
    from pointcast.server.run import parse_time

    tokyo = "2026-11-22T09:00+09:00"
    for read in (utc_time, parse_init, _utc_time, parse_time):
        t = read(tokyo)
        assert t == datetime(2026, 11, 22, 0, 0, tzinfo=UTC) and t.tzinfo is UTC
        assert read("2026-11-22T00:00").tzinfo is UTC
    with pytest.raises(ValueError):
        utc_time("yesterday")
    assert parse_time("yesterday") is None and parse_time(None) is None


# --- ensembles --------------------------------------------------------------------------------


@pytest.mark.parametrize("models, ensembles, key, reason", [
    ('["icon-eu", "ifs"]', '["ifs"]', "products.eu-medium.ensembles", "model 'ifs' is not an ensemble"),
    ('["icon-eu", "ens"]', '["ens"]', "products.eu-medium.models", "model 'ens' is an ensemble: name it in 'ensembles'"),
])
def test_an_ensemble_in_the_wrong_list_names_the_file_key_and_line(tmp_path, models, ensembles, key, reason):
    """Which models are ensembles is the sources' to say (above the configuration): `pointcast
    check` and the cycle refuse the mix-up with the file, key and line (`sourcing.check_models`)."""
    import subprocess
    import sys

    text = BASE.replace('models = ["icon-eu", "ifs"]', f"models = {models}\nensembles = {ensembles}").replace(
        "[models.icon-eu]", "[models.ens]\nsource = \"sample\"\n[models.icon-eu]")
    path = write(tmp_path, text)
    cfg = load_config(path)
    from pointcast.sourcing import check_models

    with pytest.raises(ConfigError) as ei:
        check_models(cfg)
    assert (ei.value.file, ei.value.key) == (str(path), key)
    assert ei.value.line == line_of(text, key.rsplit(".", 1)[1] + " =") and reason in ei.value.reason
    if key.endswith("ensembles"):  # once through the command a user runs
        done = subprocess.run([sys.executable, "-m", "pointcast.cli", "check", "--config", str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 2 and f"{path}:{ei.value.line}: {key}: " in done.stderr


def test_an_unknown_model_names_the_file_key_and_line(tmp_path):
    from pointcast.sourcing import check_models

    text = BASE.replace("[models.icon-eu]", "[models.icon-eu-epss]\nsource = \"sample\"\n[models.icon-eu]")
    with pytest.raises(ConfigError) as ei:
        check_models(load_config(write(tmp_path, text)))
    assert (ei.value.key, ei.value.line) == ("models.icon-eu-epss", line_of(text, "[models.icon-eu-epss]"))
    assert "unknown model" in ei.value.reason and "icon-eu-eps" in ei.value.reason


def test_points_csv_reports_every_bad_row(tmp_path):
    """Several bad rows: each one named with its line and column, not only the first."""
    csv_text = (POINTS + "bad-lat,Bad,95,0,,\n" + "Upper,Upper,48,2,,\n" + "paris,Again,48.5,2.5,,\n"
                + "short,Short,48\n" + "ok-too,Ok,50.0,5.0,,\n")
    cfg_path = write(tmp_path, points=csv_text)
    err = expect_error(cfg_path, 4, "lat", "outside [-90, 90]", file=tmp_path / "points.csv")
    shown = tmp_path / "points.csv"
    assert [(e.line, e.key) for e in err.others] == [(5, "id"), (6, "id"), (7, "row")]
    lines = str(err).splitlines()
    assert [line.split(": ")[0] for line in lines] == [f"{shown}:{n}" for n in (4, 5, 6, 7)]
    assert "duplicate id 'paris' (first on line 2)" in lines[2] and "expected 6 fields" in lines[3]


def test_points_outside_the_coverage_are_all_reported(tmp_path):
    csv_text = POINTS + "new-york,New York,40.7,-74.0,,\n" + "tokyo,Tokyo,35.68,139.77,,\n"
    err = expect_error(write(tmp_path, points=csv_text), 4, "lat,lon", "outside the coverage",
                       file=tmp_path / "points.csv")
    assert [(e.line, e.key) for e in err.others] == [(5, "lat,lon")] and "'tokyo'" in err.others[0].reason


def test_archive_keep_days_is_read_and_checked(tmp_path):
    assert load_config(write(tmp_path)).output.archive_keep_days is None  # default: keep every cycle
    toml = BASE.replace("keep_runs = 8", "keep_runs = 8\narchive_keep_days = 30")
    assert load_config(write(tmp_path, toml)).output.archive_keep_days == 30.0
    for bad in ("0", "-1", '"month"'):
        toml = BASE.replace("keep_runs = 8", f"keep_runs = 8\narchive_keep_days = {bad}")
        expect_error(write(tmp_path, toml), 4, "output.archive_keep_days", "expected a positive number of days")
    toml = BASE.replace('root = "out"', 'root = "s3://bucket/pc"').replace("keep_runs = 8", "keep_runs = 8\narchive_keep_days = 30")
    expect_error(write(tmp_path, toml), 4, "output.archive_keep_days", "needs a local root")


def test_check_leaves_the_output_root_as_it_is(tmp_path):
    """`pointcast check` (its own process, so no raster is in memory yet) caches the coverage
    raster it builds in the user's XDG cache: the output root is not created."""
    import subprocess
    import sys

    toml = BASE.split("[products.eu-medium]")[0] + (
        '[products.japan]\npoints = "points.csv"\nmodels = ["ifs"]\nfreqs = ["1H"]\nhorizon_hours = 240\n')
    cfg = write(tmp_path, toml, HEADER + "tokyo,Tokyo,35.6812,139.7671,40,\n")
    env = {k: v for k, v in os.environ.items() if k != "POINTCAST_CACHE_DIR"} | {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    done = subprocess.run([sys.executable, "-m", "pointcast.cli", "check", "--config", str(cfg)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "japan: 1 points" in done.stdout
    assert not (tmp_path / "out").exists()
    assert [p.name.split("-")[1] for p in (tmp_path / "xdg" / "pointcast").glob("coverage-*.npy")] == ["japan"]


# --- horizons the models reach (sourcing.check_models) ------------------------------------------------

GLOBAL_POINTS = REPO / "config" / "points" / "global.csv"
REACH_TOML = BASE.replace("[models.ifs]", "[models.gfs]\nsource = \"sample\"\n[models.msm]\nsource = \"sample\"\n"
                          "[models.ens]\nsource = \"sample\"\n[models.icon-eu-eps]\nsource = \"sample\"\n[models.ifs]") + f"""
[products.japan]
points = "{JAPAN_POINTS.as_posix()}"
models = ["msm", "ifs"]
ensembles = ["ens"]
horizon_hours = 240

[products.global]
points = "{GLOBAL_POINTS.as_posix()}"
models = ["gfs", "ifs"]
max_lead_hours = {{ gfs = 120 }}
horizon_hours = 342
"""


def without_global(text: str) -> str:
    return text.split("\n[products.global]")[0]


def check(tmp_path: Path, text: str) -> list[str]:
    from pointcast.sourcing import check_models

    return check_models(load_config(write(tmp_path, text)))


def _in(text: str, product: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` in the table of ``product`` only."""
    head, _, rest = text.partition(f"[products.{product}]")
    table, sep, tail = rest.partition("\n[")
    assert old in table
    return head + f"[products.{product}]" + table.replace(old, new) + sep + tail


@pytest.mark.parametrize("product, old, new, key, reason", [
    # the two: global too short for 14 local days in any zone, Japan beyond IFS's 360 h
    ("global", "horizon_hours = 342", "horizon_hours = 300", "horizon_hours",
     "300 h is too short for global's local days: at least 338 h"),
    ("japan", "horizon_hours = 240", "horizon_hours = 400", "horizon_hours",
     "400 h is beyond what its models reach: at most 360 h from a run's start: msm 39 h at its "
     "03/06/09/15/18/21 UTC runs, which may be its newest; ifs 360 h at its 00/12 UTC runs"),
    ("japan", "horizon_hours = 240", "horizon_hours = 239", "horizon_hours", "at least 240 h"),
    ("global", "horizon_hours = 342", "horizon_hours = 361", "horizon_hours",
     "at most 360 h from a run's start: gfs 120 h by max_lead_hours; ifs 360 h"),
    # IFS before the last model: its newest run may be a 144 h one (06/18 UTC)
    ("eu-medium", 'models = ["icon-eu", "ifs"]', 'models = ["ifs", "icon-eu"]', "horizon_hours",
     "at most 144 h from a run's start: ifs 144 h at its 06/18 UTC runs, which may be its newest; icon-eu 120 h"),
    # ... and its part cut short by max_lead_hours
    ("eu-medium", 'models = ["icon-eu", "ifs"]\nfreqs = ["1H", "30min", "15min"]\nhorizon_hours = 336',
     'models = ["ifs", "icon-eu"]\nmax_lead_hours = { ifs = 100 }\nfreqs = ["1H"]\nhorizon_hours = 121',
     "horizon_hours", "121 h is beyond what its models reach: at most 120 h from a run's start: ifs 100 h by "
     "max_lead_hours; icon-eu 120 h"),
])
def test_a_horizon_the_models_cannot_serve_names_the_file_key_and_line(tmp_path, product, old, new, key, reason):
    text = _in(REACH_TOML, product, old, new)
    with pytest.raises(ConfigError) as ei:
        check(tmp_path, text)
    path = f"products.{product}.{key}"
    assert (ei.value.file, ei.value.key) == (str(tmp_path / "pointcast.toml"), path)
    table = line_of(text, f"[products.{product}]")
    assert ei.value.line == table - 1 + line_of(text.split(f"[products.{product}]")[1], f"{key} ="), ei.value
    assert reason in ei.value.reason, ei.value.reason


def test_the_horizons_the_models_reach_are_accepted_to_their_ends(tmp_path):
    """The shortest horizons the local days need and the longest the models reach pass."""
    for product, old, new in (("global", "342", "338"), ("global", "342", "360"), ("japan", "240", "360")):
        assert check(tmp_path, _in(REACH_TOML, product, f"horizon_hours = {old}", f"horizon_hours = {new}")) == []


def test_a_source_horizon_cap_counts(tmp_path):
    """A source's horizon_hours caps its models' runs: IFS capped at 300 h no longer ends a
    336 h blend, and the message says which cap."""
    text = REACH_TOML.replace('init = "latest"', 'init = "latest"\nhorizon_hours = 300')
    text = _in(_in(text, "japan", "horizon_hours = 240", "horizon_hours = 300"), "global", "342", "300")
    text = _in(text, "global", "horizon_hours = 300", "horizon_hours = 338")
    with pytest.raises(ConfigError) as ei:
        check(tmp_path, text)
    assert ei.value.key == "products.eu-medium.horizon_hours"
    assert "at most 300 h from a run's start: icon-eu 120 h; ifs 300 h at its 00/12 UTC runs, by " \
           "[sources.sample] horizon_hours" in ei.value.reason


def test_ensembles_that_end_before_the_horizon_are_a_note_not_an_error(tmp_path):
    """A product's ensembles short of its horizon degrade it by design (the neighbourhood
    probability and no quantiles beyond them, docs/config.md): `pointcast check` says so with
    the file, key and line, and passes."""
    import subprocess
    import sys

    text = _in(without_global(REACH_TOML), "eu-medium", "horizon_hours = 336",
               'horizon_hours = 336\nensembles = ["icon-eu-eps"]')
    assert check(tmp_path, _in(text, "eu-medium", '["icon-eu-eps"]', '["icon-eu-eps", "ens"]')) == []
    notes = check(tmp_path, text)
    path = tmp_path / "pointcast.toml"
    line = line_of(text, 'ensembles = ["icon-eu-eps"]')
    assert notes == [f"{path}:{line}: products.eu-medium.ensembles: the "
                     "ensembles reach 120 h of the 336 h horizon: icon-eu-eps 120 h; beyond, the neighbourhood "
                     "probability and no quantiles (docs/config.md)"]
    done = subprocess.run([sys.executable, "-m", "pointcast.cli", "check", "--config", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith(f"note: {notes[0]}\n"), done


def test_the_cli_refuses_a_horizon_beyond_the_models(tmp_path):
    """`pointcast check` (exit 2, file:line: key) on the issue's Japan horizon of 400 h, which
    used to pass it (without global, whose coverage a new process would build for seconds)."""
    import subprocess
    import sys

    text = _in(without_global(REACH_TOML), "japan", "horizon_hours = 240", "horizon_hours = 400")
    path = write(tmp_path, text)
    done = subprocess.run([sys.executable, "-m", "pointcast.cli", "check", "--config", str(path)],
                          capture_output=True, text=True)
    line = line_of(text, "horizon_hours = 400")
    assert done.returncode == 2 and f"{path}:{line}: products.japan.horizon_hours: 400 h is beyond" in done.stderr


def test_sample_members_is_a_count_of_at_least_two(tmp_path):
    """`members` of a sample source: each ensemble's first N (docs/config.md); one member
    has no spread, so no quantile or share of members."""
    cfg = load_config(write(tmp_path, BASE.replace("scale = 4\n", "scale = 4\nmembers = 10\n")))
    assert cfg.sources["sample"].options["members"] == 10
    for bad, reason in (("1", "must be >= 2"), ('"10"', "expected an integer")):
        path = write(tmp_path, BASE.replace("scale = 4\n", f"scale = 4\nmembers = {bad}\n"))
        expect_error(path, 16, "sources.sample.members", reason)
