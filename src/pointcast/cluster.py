"""Where a cycle's dask work runs (`[dask] scheduler`): threads in the cycle's process, a
LocalCluster of worker processes started for the cycle, or an existing cluster at a tcp
address (docs/config.md, "[dask]")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import dask

from .config import Config

log = logging.getLogger(__name__)


@contextmanager
def dask_scheduler(cfg: Config) -> Iterator[None]:
    """The dask scheduler of `[dask]`: local threads by default, or a distributed cluster
    (a LocalCluster of `workers` processes started here, or an existing one at a tcp address,
    whose workers must see the cache directory and the output root at the same paths). The
    client is the default scheduler while the context is open, so every `dask.compute` of the
    stages, and the build's slice tasks (`build.build_blend`), run there."""
    if cfg.dask.scheduler in ("threads", "synchronous"):
        with dask.config.set(scheduler=cfg.dask.scheduler, num_workers=cfg.dask.workers):
            yield
        return
    from dask.distributed import Client, LocalCluster

    if cfg.dask.scheduler == "local-cluster":
        # distributed's nannies start their workers with MALLOC_TRIM_THRESHOLD_=65536. Any
        # fixed trim threshold also fixes glibc's mmap threshold (mallopt(3)), so every array
        # above 128 KiB would be mapped and faulted in anew each time, which a slice's arrays
        # of a few MB are thousands of times (docs/performance.md, "Workers' heaps"). Each
        # slice gives back what it freed itself (`build.build_slice`).
        with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
            cluster = LocalCluster(n_workers=cfg.dask.workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
    else:
        cluster, client = None, Client(cfg.dask.scheduler)
    log.info("dask: %s with %d workers", client.scheduler.address,
                   len(client.scheduler_info()["workers"]))
    try:
        yield
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
