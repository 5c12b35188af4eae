"""The publish stage: validated, atomic publication of runs, retention, and the Zarr archive.

One module a job:

==================  ===========================================================================
``staging.py``      a run's JSON tree (plain and/or ``.gz``, as ``[output] json`` says) written
                    into its private staging directory while the products render it
                    (`TreeWriter`, `StagedFiles`)
``tree.py``         a staged run made the served one: manifest, validation report and viewer
                    files written, then the backend's atomic step (`publish_run`); `current_run`,
                    `carry_product`
``cycle.py``        a cycle's publication steps: tree made durable beside the archives' appends,
                    the run made visible, retention; a failed cycle's staging removed
                    (`publish_cycle`, `cleaned_up`)
``retention.py``    which runs and cached model runs are deleted (`retain`, `retain_cache`, `make_room`)
``archive.py``      the Zarr append protocol, one store per product (`append_archive`)
``stage.py``        a run's staged archives, written region by region by the build slices and
                    appended from lazily (`ArchiveStage`, `write_region`)
``backend.py``      the layout of an output root, the errors, and `Backend`, the interface
                    the three stages above are written against
``roots.py``        which backend an output root has (`backend_for`)
``local.py``        `Backend` for a local directory: rename, symlink swap, ``flock``, fsync
``objectstore.py``  `Backend` for an fsspec URL: whole-object uploads, ``current`` last
``durable.py``      fsync'd writes, replacements and deletions on a local file system
==================  ===========================================================================

Every function taking a ``root`` accepts a local path or a URL and picks the backend itself.
"""

from .archive import (
                      ARCHIVE_CODEC,
                      CHUNK_BYTES,
                      HEIGHT,
                      INIT,
                      LEAD,
                      POINT,
                      SHARD_BYTES,
                      append_archive,
                      archive_stores,
                      open_committed,
                      zarr_settings,
)
from .backend import (
                      CURRENT,
                      FAILED,
                      JSON_DIR,
                      RUNS,
                      STAGING_PREFIX,
                      VERIFICATION_DIR,
                      ZARR_DIR,
                      ArchiveError,
                      Backend,
                      PublishError,
                      PublishRefused,
                      is_url,
)
from .cycle import APPENDS, cleaned_up, publish_cycle
from .durable import check_writable, fsync_dir, replace_bytes, write_bytes
from .retention import NoRoom, make_room, retain, retain_cache, tree_bytes
from .roots import backend_for
from .stage import ArchiveStage, remove_stage, write_region
from .staging import GZIP_LEVEL, WRITE_BATCH, WRITE_THREADS, StagedFiles, TreeWriter, gzip_bytes, write_json_tree
from .tree import (
                      HISTORY_ERRORS,
                      HISTORY_RUNS,
                      add_viewer,
                      carry_product,
                      current_run,
                      dump_json,
                      new_run_dir,
                      publish_run,
                      run_history,
                      to_json_types,
)

__all__ = [
    "APPENDS", "ARCHIVE_CODEC", "CHUNK_BYTES", "CURRENT", "FAILED", "GZIP_LEVEL", "HEIGHT", "HISTORY_ERRORS",
    "HISTORY_RUNS", "INIT", "JSON_DIR", "LEAD", "POINT", "RUNS", "SHARD_BYTES", "STAGING_PREFIX",
    "VERIFICATION_DIR", "WRITE_BATCH", "WRITE_THREADS", "ZARR_DIR",
    "ArchiveError", "ArchiveStage", "Backend", "PublishError", "PublishRefused", "StagedFiles", "TreeWriter",
    "add_viewer", "append_archive", "archive_stores", "backend_for", "carry_product", "check_writable", "cleaned_up",
    "current_run", "dump_json", "fsync_dir", "gzip_bytes", "is_url", "new_run_dir", "open_committed",
    "publish_cycle", "publish_run", "remove_stage", "replace_bytes", "retain", "retain_cache", "make_room", "NoRoom", "run_history", "to_json_types", "tree_bytes",
    "write_bytes", "write_json_tree", "write_region", "zarr_settings",
]
