"""decode_vs_eccodes: pointcast's decode stage against plain ecCodes over the same messages.

"The same messages" are those of the run's files that the model's encoding table names (what
the cycle needs). The plain ecCodes side reads each message's bytes and calls
``codes_get_values``; pointcast's side is ``ingest.decode`` (header pass, lazy reads, unit
scaling, de-accumulation) computed to the values, block by block (each block's shape is kept,
so that the fields need not be held), its header pass started cold. Both run on the same
number of threads.
"""

from __future__ import annotations

import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import dask
import eccodes
import numpy as np

from pointcast import ingest
from pointcast.config import Config
from pointcast.sources import MODELS
from pointcast.sourcing import make_source


def fetched_files(cfg: Config, model_id: str) -> list[Path]:
    """The files of the configured run of ``model_id`` (written by the sample source once)."""
    model = MODELS[model_id]
    source = make_source(cfg.models[model_id].source, cfg.source_for(model_id))
    run = source.discover(model, datetime.now(UTC))
    return list(source.fetch(run, model, cfg.output.cache_dir).files)


def needed_messages(files: list[Path], model_id: str) -> list[ingest.Message]:
    fields = MODELS[model_id].fields
    msgs = [m for f in files for m in ingest.index_file(f)]
    return [m for m in msgs if any(ingest.matches(row, m) for row in fields)]


def _plain(msg: ingest.Message) -> int:
    with open(msg.path, "rb") as f:  # the field's bytes (one field of a JMA message)
        raw = ingest.field_bytes(functools.partial(os.pread, f.fileno()), msg.offset, msg.length,
                                 msg.parts)
    h = eccodes.codes_new_from_message(raw)
    try:
        return len(eccodes.codes_get_values(h))
    finally:
        eccodes.codes_release(h)


def time_eccodes(msgs: list[ingest.Message], threads: int) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(_plain, msgs))
    return time.perf_counter() - t0


def time_pointcast(files: list[Path], model_id: str, threads: int) -> float:
    model = MODELS[model_id]
    # The header pass starts cold, as a process's first cycle does, though
    # needed_messages and the previous repetition filled the descriptions it keeps.
    ingest.forget_descriptions()
    t0 = time.perf_counter()
    ds = ingest.decode(files, model.fields, model=model_id)
    # Each block is decoded into memory and dropped, as the plain side's arrays are: a sum
    # would add a pass over the values that the plain side does not make.
    blocks = [b for v in ds.data_vars.values() for b in v.data.to_delayed(optimize_graph=False).ravel()]
    with dask.config.set(scheduler="threads", num_workers=threads):
        dask.compute(*(dask.delayed(np.shape)(b) for b in blocks), optimize_graph=False)
    return time.perf_counter() - t0


def measure(cfg: Config, models: list[str], threads: int, repeat: int = 2, pointcast: bool = True) -> dict:
    """Per model and in total: messages, plain ecCodes seconds, pointcast decode seconds (not
    measured without ``pointcast``: the floor alone).

    The two sides alternate ``repeat`` times and each keeps its best time: on a shared machine
    a burst of other work then slows one attempt, not one side."""
    out = {}
    for m in models:
        files = fetched_files(cfg, m)
        msgs = needed_messages(files, m)  # also warms the page cache for both sides
        ecc, pc = [], []
        for _ in range(repeat):
            ecc.append(time_eccodes(msgs, threads))
            if pointcast:
                pc.append(time_pointcast(files, m, threads))
        out[m] = {"messages": len(msgs), "eccodes_s": min(ecc), "pointcast_s": min(pc, default=float("nan"))}
    return out
