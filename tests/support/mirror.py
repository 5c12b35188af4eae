"""A loopback HTTP mirror of the upstreams, for the source tests.

``Mirror`` is a real HTTP/1.1 server (``http.server.ThreadingHTTPServer`` on 127.0.0.1, an
ephemeral port) serving a directory tree: GET and HEAD, ``Range: bytes=a-b`` / ``bytes=a-``
answered with 206 and ``Content-Range``, 416 for a range past the end. It records every
request and can inject faults on paths matching a pattern: ``404``, ``500``, ``slow``
(an answer delayed by ``delay`` seconds), ``truncate`` (a body shortened to half, with a
``Content-Length`` that agrees: only the index can tell), ``cut`` (the full length declared,
half sent, connection closed) and ``corrupt`` (right length, GRIB sections after section 0
overwritten, so the message no longer decodes).

``publish_sample`` fills the tree from the sample source, in each upstream's real layout:
``ecmwf/<YYYYMMDD>/<HH>z/ifs/0p25/<stream>/...`` with ``.index`` files (the ``scda`` layout of
the 06/18 UTC runs on request), ``noaa/gfs.<YYYYMMDD>/<HH>/atmos/...`` with wgrib2 ``.idx``
files, ``jma/<YYYY>/<MM>/<DD>/Z__C_RJTD_..._grib2.bin``, ``dwd/v1/m/<model>/p/...`` (DWD's v1
tree, one message per file, the run directory's colon arriving percent-encoded as from a real
client) or ``dwd/<model>/grib/<HH>/...`` (the legacy bz2 tree). ``add_foreign_message`` puts a message
no table asks for into the middle of a file and its index, as real files hold many more fields
than pointcast takes.
"""

from __future__ import annotations

import bz2
import json
import os
import re
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import eccodes

ROOTS = {"ifs": "ecmwf", "gfs": "noaa", "msm": "jma", "icon-eu": "dwd", "icon-d2": "dwd"}


@dataclass
class Fault:
    pattern: str
    kind: str  # "404" | "500" | "slow" | "truncate" | "cut" | "corrupt"
    times: int | None = 1  # None: every matching request
    delay: float = 0.0
    method: str = "GET"


@dataclass
class Request:
    """One request as the mirror saw it (recorded on arrival, completed when answered)."""

    method: str
    path: str
    range: str | None
    status: int = 0
    sent: int = 0  # body bytes sent


class Mirror:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- control ---------------------------------------------------------------------------

    def fail(self, pattern: str, kind: str, times: int | None = 1, delay: float = 0.0,
             method: str = "GET") -> None:
        with self._lock:
            self.faults.append(Fault(pattern, kind, times, delay, method))

    def gets(self, pattern: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and re.search(pattern, r.path)]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.faults.clear()

    def url(self, prefix: str = "") -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/{prefix}".rstrip("/")

    def __enter__(self) -> Mirror:
        mirror = self

        class Handler(_Handler):
            owner = mirror

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- used by the handler ---------------------------------------------------------------

    def _fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.method == method and re.search(f.pattern, path) and f.times != 0:
                    if f.times is not None:
                        f.times -= 1
                    return f
        return None

    def _record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # a client that timed out and left: expected in the fault tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body are two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK of the head, about 40 ms an answer on a kept-alive connection.
    # Real servers set TCP_NODELAY; so does this one.
    disable_nagle_algorithm = True
    owner: Mirror

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _send(self, status: int, data: bytes, body: bool, headers: dict | None = None,
              declared: int | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data) if declared is None else declared))
        self.end_headers()
        self.req.status = status
        if body:
            self.wfile.write(data)
            self.req.sent = len(data)

    def _serve(self, body: bool) -> None:
        path = unquote(self.path.split("?")[0])  # as a real server: %3A is a colon
        self.req = Request(self.command, self.path, self.headers.get("Range"))
        self.owner._record(self.req)
        fault = self.owner._fault(self.command, path)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay)
        if fault is not None and fault.kind in ("404", "500"):
            return self._send(int(fault.kind), b"injected\n", body)
        # Inside the tree only (the tree holds no symbolic links: its normal form is enough).
        rel = os.path.normpath(path.lstrip("/"))
        target = self.owner.root / rel
        if rel.startswith("..") or os.path.isabs(rel) or not target.is_file():
            return self._send(404, b"not found\n", body)
        status, headers = 200, {"Accept-Ranges": "bytes"}
        rng = self.headers.get("Range")
        with open(target, "rb") as f:
            total = os.fstat(f.fileno()).st_size
            if rng:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not m:
                    return self._send(400, b"bad range\n", body)
                a = int(m.group(1))
                b = min(int(m.group(2)), total - 1) if m.group(2) else total - 1
                if a >= total or b < a:
                    return self._send(416, b"", body, {"Content-Range": f"bytes */{total}"})
                data = os.pread(f.fileno(), b + 1 - a, a)
                status = 206
                headers["Content-Range"] = f"bytes {a}-{b}/{total}"
            else:
                data = f.read()
        if fault is not None and fault.kind == "truncate":
            data = data[:len(data) // 2]
        elif fault is not None and fault.kind == "corrupt" and len(data) > 20:
            data = data[:16] + b"\xff" * (len(data) - 20) + data[-4:]
        elif fault is not None and fault.kind == "cut" and body:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.req.status, self.req.sent = status, len(data) // 2
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(status, data, body, headers)


# ------------------------------------------------------------------------------------------
# Filling the tree
# ------------------------------------------------------------------------------------------


def publish_sample(tree: Path, cache: Path, model_id: str, init: str, *, scale: int = 16,
                   horizon_hours: float | None = None, stream: str = "oper",
                   icon_layout: str = "v1") -> list[Path]:
    """Write the sample run of ``model_id`` at ``init`` and place its files in ``tree`` as the
    upstream lays them out (DWD: ``icon_layout`` "v1" or "legacy"). Returns the data files
    placed, in step order."""
    import pointcast  # noqa: F401  (PROJ before ecCodes)
    from pointcast.sample import SampleSource
    from pointcast.sources import MODELS

    model = MODELS[model_id]
    src = SampleSource(scale=scale, init=init, horizon_hours=horizon_hours,
                       icon_layout=icon_layout)
    run = src.discover(model, datetime.fromisoformat(init.replace("Z", "+00:00")))
    fetched = src.fetch(run, model, cache)
    run_dir = fetched.files[0].parent
    while run_dir.name != f"{run.init:%Y%m%d%H}":
        run_dir = run_dir.parent
    placed = []
    for f in fetched.files:
        rel = f.relative_to(run_dir)
        companions = [p for p in (f.with_suffix(".index"), Path(f"{f}.idx")) if p.exists()]
        if model_id == "msm":
            rel = Path(f"{run.init:%Y/%m/%d}") / rel
        if model_id == "ifs" and stream != "oper":
            rel = Path(str(rel).replace("oper", stream))
        dest = tree / ROOTS[model_id] / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
        for c in companions:
            text = c.read_text()
            if stream != "oper":
                text = text.replace('"stream": "oper"', f'"stream": "{stream}"')
            target = dest.with_suffix(".index") if c.suffix == ".index" else Path(f"{dest}.idx")
            target.write_text(text)
        placed.append(dest)
    return placed


def spanning_levels(sample_files) -> tuple[int, int, tuple[int, ...]]:
    """What a reader of the ICON run ``sample_files`` (the sample's: every half level) should
    choose, read here with plain ecCodes from its HHL messages: (half levels, the lowest full
    level, the full levels from the lowest up to the first one at or above 300 m above the
    ground at every cell)."""
    hhl = {}
    for f in sample_files:
        if "/HHL/" in str(f) or "/hhl/" in str(f):
            data = Path(f).read_bytes()
            h = eccodes.codes_new_from_message(bz2.decompress(data) if f.suffix == ".bz2"
                                               else data)
            hhl[eccodes.codes_get_long(h, "level")] = eccodes.codes_get_values(h)
            nlev = eccodes.codes_get_long(h, "nlev")
            eccodes.codes_release(h)
    assert sorted(hhl) == list(range(1, nlev + 1))  # the sample has every half level
    ground = hhl[nlev]
    for top in range(nlev - 1, 0, -1):
        if (0.5 * (hhl[top] + hhl[top + 1]) - ground).min() >= 300.0:
            return nlev, nlev - 1, tuple(range(top, nlev))
    raise AssertionError("no level reaches 300 m")


def add_foreign_message(path: Path) -> int:
    """Insert a message no model table asks for (a copy of the first message relabelled:
    ECMWF skin temperature ``skt`` / NCEP ``TMP:500 mb``) after the file's second message and
    list it in the index. Returns its length."""
    data = path.read_bytes()
    offsets = []
    pos = 0
    while pos < len(data):
        offsets.append(pos)
        pos += int.from_bytes(data[pos + 8:pos + 16], "big")
    h = eccodes.codes_new_from_message(data[:offsets[1]])
    try:
        ecmwf = path.suffix == ".grib2"
        if ecmwf:
            eccodes.codes_set(h, "paramId", 235)  # skt
        else:
            eccodes.codes_set(h, "parameterCategory", 0)
            eccodes.codes_set(h, "parameterNumber", 0)
            eccodes.codes_set(h, "typeOfFirstFixedSurface", 100)
            eccodes.codes_set(h, "scaledValueOfFirstFixedSurface", 50000)
        foreign = eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)
    at = offsets[2]
    path.write_bytes(data[:at] + foreign + data[at:])
    n = len(foreign)
    if ecmwf:
        index = path.with_suffix(".index")
        lines = [json.loads(x) for x in index.read_text().splitlines() if x.strip()]
        for e in lines:
            if e["_offset"] >= at:
                e["_offset"] += n
        lines.insert(2, dict(lines[0], param="skt", _offset=at, _length=n))
        index.write_text("".join(json.dumps(e) + "\n" for e in lines))
    else:
        index = Path(f"{path}.idx")
        rows = [x.split(":") for x in index.read_text().splitlines() if x.strip()]
        for r in rows:
            if int(r[1]) >= at:
                r[1] = str(int(r[1]) + n)
        rows.insert(2, ["", str(at), rows[0][2], "TMP", "500 mb", rows[0][5], ""])
        index.write_text("".join(f"{i + 1}:" + ":".join(r[1:]) + "\n" for i, r in enumerate(rows)))
    return n


# ------------------------------------------------------------------------------------------
# Ensembles: tiny runs in the real layouts, written with ecCodes
# ------------------------------------------------------------------------------------------

ENSEMBLE_ROOTS = {"ens": "ecmwf", "gefs": "noaa", "icon-eu-eps": "dwd"}
# What each ensemble's tables read, as (paramId, accumulated) per ``.index`` / wgrib2 / DWD name.
_ENS_PARAMS = {"2t": (167, False), "10u": (165, False), "10v": (166, False),
               "100u": (228246, False), "100v": (228247, False), "tp": (228, True)}
_GEFS_PARAMS = {("TMP", "2 m above ground"): (167, False), ("UGRD", "10 m above ground"): (165, False),
                ("VGRD", "10 m above ground"): (166, False), ("APCP", "surface"): (228228, True),
                # at every step, as NOAA writes them; the table reads them at f000 only
                ("PRES", "surface"): (134, False), ("PRMSL", "mean sea level"): (260074, False)}
_EPS_PARAMS = {"T_2M": (167, False), "U_10M": (165, False), "V_10M": (166, False),
               "TOT_PREC": (228228, True)}
HSURF_ID = 500007  # ecCodes' paramId of DWD's HSURF
EPS_UUID = "ae487d28fe2e11e4af85e50a2a56a360"  # a uuidOfHGrid for the tiny ICON-EU-EPS grid
EPS_CELLS = 16


def ensemble_value(param_id: int, member: int, step: int) -> float:
    """The constant value of a member's field in the trees below (tells members apart)."""
    return param_id % 1000 + member + step / 100


def _member_message(centre: str, param_id: int, init: datetime, step: int, member: int | None,
                    size: int, accum_from: int | None, cells: int | None = None) -> bytes:
    """One GRIB2 message: an ensemble member's (template 4.1, 4.11 accumulated;
    ``typeOfEnsembleForecast`` 1 for the control, 3 for a perturbed member) or, ``member``
    None, a deterministic one (4.0, 4.8), as ECMWF's ``oper-fc`` control; on the sample's
    regular grid or on ``cells`` cells of an unstructured grid (template 3.101)."""
    h = eccodes.codes_grib_new_from_samples("GRIB2")
    try:
        s = eccodes.codes_set
        s(h, "centre", centre)
        s(h, "dataDate", int(f"{init:%Y%m%d}"))
        s(h, "dataTime", int(f"{init:%H%M}"))
        if cells is not None:
            s(h, "gridDefinitionTemplateNumber", 101)
            s(h, "numberOfDataPoints", cells)
            s(h, "numberOfGridUsed", 37)
            s(h, "numberOfGridInReference", 1)
            eccodes.codes_set_string(h, "uuidOfHGrid", EPS_UUID)
            s(h, "shapeOfTheEarth", 6)
        ensemble = member is not None
        s(h, "productDefinitionTemplateNumber", (11 if ensemble else 8) if accum_from is not None
          else (1 if ensemble else 0))
        if param_id in (1, 2):  # DWD's CLAT/CLON (0/191/1, 0/191/2)
            s(h, "parameterCategory", 191)
            s(h, "parameterNumber", param_id)
        elif param_id == HSURF_ID:  # DWD's HSURF: 0/3/6 from the surface to mean sea level
            for key, v in (("parameterCategory", 3), ("parameterNumber", 6), ("typeOfFirstFixedSurface", 1),
                           ("typeOfSecondFixedSurface", 101)):
                s(h, key, v)
        else:
            s(h, "paramId", param_id)
        if ensemble:
            s(h, "typeOfEnsembleForecast", 1 if member == 0 else 3)
            s(h, "perturbationNumber", member)
            s(h, "numberOfForecastsInEnsemble", size)
        if accum_from is not None:
            s(h, "startStep", accum_from)
            s(h, "endStep", step)
        else:
            s(h, "step", step)
        n = eccodes.codes_get(h, "numberOfDataPoints")
        value = ensemble_value(param_id, member or 0, step)
        eccodes.codes_set_values(h, [value + 0.25 * (k % 2) for k in range(n)])
        return eccodes.codes_get_message(h)
    finally:
        eccodes.codes_release(h)


def publish_ensemble(tree: Path, model_id: str, init: datetime, steps: list[int]) -> list[Path]:
    """Write a tiny run of an ensemble in its upstream's real layout (``sources/ens.py``,
    ``gefs.py``, ``icon_eps.py``), every member, with the real index formats; returns the data
    files written."""
    from pointcast.sources import MODELS

    model = MODELS[model_id]
    root = tree / ENSEMBLE_ROOTS[model_id]
    out: list[Path] = []

    def write(rel: str, messages: list[tuple[dict, bytes]], index: str | None, bz: bool = False):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join(m for _, m in messages)
        path.write_bytes(bz2.compress(data) if bz else data)
        offsets, at = [], 0
        for _, m in messages:
            offsets.append(at)
            at += len(m)
        if index == "ecmwf":
            path.with_suffix(".index").write_text("".join(
                json.dumps(dict(e, _offset=o, _length=len(m))) + "\n"
                for (e, m), o in zip(messages, offsets, strict=True)))
        elif index == "wgrib2":
            Path(f"{path}.idx").write_text("".join(
                f"{i}:{o}:d={init:%Y%m%d%H}:{e['param']}:{e['level']}:{e['time']}:ENS={e['ens']}\n"
                for i, ((e, _), o) in enumerate(zip(messages, offsets, strict=True), 1)))
        out.append(path)

    for step in steps:
        if model_id == "ens":
            for stream, kind, members in (("enfo", "ef", range(1, model.members)), ("oper", "fc", (None,))):
                msgs = []
                for member in members:
                    for param, (pid, acc) in _ENS_PARAMS.items():
                        entry = {"domain": "g", "date": f"{init:%Y%m%d}", "time": f"{init:%H%M}",
                                 "expver": "0001", "class": "od", "type": "pf" if member else "fc",
                                 "stream": stream, "step": str(step), "levtype": "sfc",
                                 **({"number": str(member)} if member else {}), "param": param}
                        msgs.append((entry, _member_message("ecmf", pid, init, step, member,
                                                            model.members, 0 if acc else None)))
                write(f"{init:%Y%m%d}/{init:%H}z/ifs/0p25/{stream}/{init:%Y%m%d%H}0000-{step}h-"
                      f"{stream}-{kind}.grib2", msgs, "ecmwf")
        elif model_id == "gefs":
            for member in range(model.members):
                msgs = []
                for (param, level), (pid, acc) in _GEFS_PARAMS.items():
                    if acc and step == 0:
                        continue
                    start = (step - 1) // 6 * 6
                    time = f"{start}-{step} hour acc fcst" if acc else (
                        "anl" if step == 0 else f"{step} hour fcst")
                    entry = {"param": param, "level": level, "time": time,
                             "ens": f"+{member}" if member else "low-res ctl"}
                    msgs.append((entry, _member_message("kwbc", pid, init, step, member,
                                                        model.members, start if acc else None)))
                name = "gec00" if member == 0 else f"gep{member:02d}"
                write(f"gefs.{init:%Y%m%d}/{init:%H}/atmos/pgrb2sp25/{name}.t{init:%H}z.pgrb2s."
                      f"0p25.f{step:03d}", msgs, "wgrib2")
        else:
            stem = f"icon-eu-eps/grib/{init:%H}"
            for param, (pid, acc) in _EPS_PARAMS.items():
                msgs = [({}, _member_message("edzw", pid, init, step, m, model.members,
                                             0 if acc else None, EPS_CELLS))
                        for m in range(1, model.members + 1)]
                name = param.lower()
                write(f"{stem}/{name}/icon-eu-eps_europe_icosahedral_single-level_"
                      f"{init:%Y%m%d%H}_{step:03d}_{name}.grib2.bz2", msgs, None, bz=True)
            if step == 0:
                for number, name in ((1, "clat"), (2, "clon"), (HSURF_ID, "hsurf")):
                    write(f"{stem}/{name}/icon-eu-eps_europe_icosahedral_time-invariant_"
                          f"{init:%Y%m%d%H}_{name}.grib2.bz2",
                          [({}, _member_message("edzw", number, init, 0, None, 0, None,
                                                EPS_CELLS))], None, bz=True)
    return out
