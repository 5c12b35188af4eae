"""A run's JSON tree, written into its staging directory while the products render it.

Nothing here makes anything visible: the tree is published by ``tree.publish_run``. What is
guaranteed is that every path is a plain relative path inside ``<staging>/json/`` and that
``TreeWriter.finish`` returns only once every file and directory is durable.

A file is written in the forms ``[output] json`` names (``JSON_MODES``, docs/config.md):
``both`` (``<rel>`` and its ``<rel>.gz`` twin), ``plain`` (``<rel>``) or ``gzip``
(``<rel>.gz`` alone). Callers name files by ``<rel>`` whatever the mode.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from isal import igzip

from .. import faults
from ..config import JSON_MODES
from .backend import JSON_DIR, PublishError
from .durable import fsync_dir, sync_file_system, write_bytes

# The .gz forms: ISA-L's igzip at level 2 compresses a forecast file several times faster
# than zlib at 6, nearly as small (docs/performance.md).
GZIP_LEVEL = 2
WRITE_THREADS = 2 * (os.cpu_count() or 1)
WRITE_QUEUE = 16  # batches rendered but not yet written, at most
WRITE_BATCH = (64, 4 << 20)  # files, bytes: a batch is one task of the write pool


def _safe_relpath(rel: str) -> str:
    """``rel`` if it is a plain relative POSIX path (no empty, ``.`` or ``..`` parts, no
    backslash or NUL); ValueError otherwise."""
    if not isinstance(rel, str) or not rel:
        raise ValueError(f"invalid relative path {rel!r}")
    if "\\" in rel or "\x00" in rel:
        raise ValueError(f"invalid relative path {rel!r}: backslash or NUL")
    if rel.startswith("/"):
        raise ValueError(f"absolute path {rel!r} is not allowed")
    if any(p in ("", ".", "..") for p in rel.split("/")):
        raise ValueError(f"path {rel!r} must be a plain relative path (no '', '.', '..' parts)")
    return rel


def gzip_bytes(data: bytes) -> bytes:
    """The ``.gz`` form of a tree's file: deterministic (no name, mtime 0), so a run written
    again has the same bytes, for static hosts that serve it with ``Content-Encoding: gzip``."""
    return igzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def _check_file(rel: str, data, names, mode: str) -> str:
    """A file of a run tree: bytes, a plain relative path (``_safe_relpath``, returned) and,
    with a ``.gz`` form, no collision with the ``.gz`` form of another of ``names``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{rel}: expected bytes, got {type(data).__name__}")
    _safe_relpath(rel)
    gz = rel if rel.endswith(".gz") else rel + ".gz"
    if mode != "plain" and (gz[:-3] if gz == rel else gz) in names:
        raise ValueError(f"{gz!r} collides with the gzip sibling of {gz[:-3]!r}")
    return rel


class TreeWriter:
    """Writes a run's JSON tree into its staging directory while the products render it.

    Each file, in the forms ``mode`` names (``JSON_MODES``; the ``.gz`` form is
    ``gzip_bytes``), is written on a thread pool, compression and writes releasing the GIL,
    in batches of ``WRITE_BATCH`` (a task per file costs more in thread hand-overs than the
    writes), with at most ``WRITE_QUEUE`` batches waiting: memory holds a few batches, not
    the run (a run of many points is tens of GB of JSON). Nothing is fsync'd per file;
    ``finish`` flushes the file system once and fsyncs the tree's directories. ``files()``
    gives a product its mapping of relative path -> bytes backed by this tree.

    ``threads=0`` writes each batch in the caller's thread: for a build process that is one of
    as many as there are cores, where a pool only adds GIL and lock hand-overs, and memory its
    threads free (the rendered bytes) goes back to the kernel to be faulted in again.
    """

    def __init__(self, staging: Path | str, mode: str = "both", threads: int = WRITE_THREADS):
        self.staging = Path(staging)
        if not self.staging.is_dir():
            raise PublishError(f"staging directory {self.staging} does not exist")
        self.base = self.staging / JSON_DIR
        if mode not in JSON_MODES:
            raise ValueError(f"JSON mode {mode!r} is not one of {', '.join(JSON_MODES)}")
        self.mode = mode
        self.plain, self.gzip = mode != "gzip", mode != "plain"  # the forms written
        self.names: set[str] = set()
        # Directories as strings: a run is a hundred files a point, and pathlib's parsing of
        # each path costs more than the checks.
        self._root = str(self.base)
        self._dirs: set[str] = {str(self.staging)}
        self._pool = ThreadPoolExecutor(max_workers=threads) if threads else None
        self._slots = threading.BoundedSemaphore(WRITE_QUEUE)  # the pool's queue
        self._errors: list[BaseException] = []
        self._queued = False  # files queued since the last drain
        self._batch: list[tuple[str, bytes]] = []  # files not yet queued, and their bytes
        self._batch_bytes = 0
        self._lock = threading.Lock()  # the products of blends built at once put files here

    def path(self, rel: str) -> Path:
        return self.base / _safe_relpath(rel)

    def read(self, rel: str) -> bytes:
        """The bytes put at ``rel``, read back from the tree (from its ``.gz`` form in gzip
        mode): only once ``drain`` has returned."""
        path = self.path(rel)
        if self.plain:
            return path.read_bytes()
        return igzip.decompress(path.with_name(path.name + ".gz").read_bytes())

    def put(self, rel: str, data: bytes) -> None:
        """Queue ``data`` for ``<staging>/json/<rel>`` in the writer's forms (checked: empty,
        absolute, ``.``/``..`` parts, backslashes and, with a ``.gz`` form, a name that collides
        with another's ``.gz`` raise ``ValueError``)."""
        with self._lock:
            path = f"{self._root}/{_check_file(rel, data, self.names, self.mode)}"
            self._raise()
            parent = path.rpartition("/")[0]
            if parent not in self._dirs:
                os.makedirs(parent, exist_ok=True)
                while parent not in self._dirs:
                    self._dirs.add(parent)
                    parent = parent.rpartition("/")[0]
            self.names.add(rel)
            self._batch.append((path, bytes(data)))
            self._batch_bytes += len(data)
            if len(self._batch) >= WRITE_BATCH[0] or self._batch_bytes >= WRITE_BATCH[1]:
                self._submit()

    def _submit(self) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        if self._pool is None:
            self._write(batch)
            return
        self._queued = True
        self._slots.acquire()
        self._pool.submit(self._write, batch).add_done_callback(self._done)

    def _write(self, batch: list[tuple[str, bytes]]) -> None:
        for path, data in batch:
            faults.point("json")
            if self.plain:
                write_bytes(path, data, sync=False)
            if self.gzip:
                write_bytes(path + ".gz", gzip_bytes(data), sync=False)

    def _done(self, future) -> None:
        if not future.cancelled() and future.exception() is not None:
            self._errors.append(future.exception())
        self._slots.release()

    def _raise(self) -> None:
        if self._errors:
            raise self._errors[0]

    def drain(self) -> None:
        """Wait until every queued file is on disk (not yet durable); raise a write's error."""
        with self._lock:
            if self._batch:
                self._submit()
        if self._queued:
            for _ in range(WRITE_QUEUE):
                self._slots.acquire()
            for _ in range(WRITE_QUEUE):
                self._slots.release()
            self._queued = False
        self._raise()

    def finish(self) -> None:
        """Make the tree durable: every file written, the file system flushed, directories fsync'd."""
        self.close()
        sync_file_system(self.staging)
        for d in sorted(self._dirs, key=lambda p: p.count("/"), reverse=True):
            fsync_dir(d)

    def close(self) -> set[str]:
        """Wait until every queued file is on disk and stop writing: for a writer of one part
        of the run's tree (a slice of points, maybe in a forked process). Returns the
        directories it made, for the run's writer to make durable (``StagedFiles.adopt``)."""
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        return set(self._dirs)

    def adopt(self, names, dirs: set[str]) -> None:
        """Count the files (relative paths) and directories another writer made in this
        staging tree as this writer's: ``finish`` makes them durable with its own."""
        with self._lock:
            if clash := self.names & set(names):
                raise ValueError(f"{sorted(clash)[0]!r} was written twice")
            self.names.update(names)
            self._dirs.update(dirs)

    def abort(self) -> None:
        """Stop writing (the caller removes the staging tree)."""
        self._batch = []
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def files(self) -> StagedFiles:
        return StagedFiles(self)


class StagedFiles(MutableMapping):
    """A product's files as they go into the staging tree: setting a path queues its bytes on
    the ``TreeWriter``; reading one reads it back from disk (the validation gate does, one file
    at a time). It holds paths, not bytes: those set here, and those other writers put
    (`adopt`), kept as one string a writer, not a string each (at 50,000 points a list, a run
    is a million files; docs/performance.md)."""

    def __init__(self, writer: TreeWriter):
        self.writer = writer
        self._rels: dict[str, bool] = {}  # path -> whether its bytes hold a JSON null
        self._adopted: list[str] = []  # a string a writer adopted: "\n" before and after each path

    def __setitem__(self, rel: str, data: bytes) -> None:
        self.put(rel, data, b"null" in data)

    def put(self, rel: str, data: bytes, null: bool) -> None:
        """Set ``rel`` when the caller knows whether ``data`` holds a JSON null (a product
        does from the texts it rendered it from: products.base.Records.null), sparing a scan
        of its bytes."""
        self.writer.put(rel, data)
        self._rels[rel] = null

    def with_null(self) -> list[str]:
        """The files set here whose bytes hold ``null`` (noted as they passed: the validation
        gate need not read every file back to find them)."""
        return [rel for rel, null in self._rels.items() if null]

    def written(self) -> str:
        """Every path set here, one string (what `adopt` takes)."""
        return "\n".join(self._rels)

    def adopt(self, written: str, dirs: set[str]) -> None:
        """Take the files another writer put into the same staging tree (``written`` of its
        StagedFiles, the directories its ``close`` returned) as this mapping's own. Their
        names are not checked against each other: the writers of a product's slices write
        the files of different points."""
        self.writer.adopt((), dirs)
        if written:
            self._adopted.append(f"\n{written}\n")

    def __getitem__(self, rel: str) -> bytes:
        """The bytes at ``rel``, read back from the tree. Once files are adopted, any file of
        the tree is read without looking for its name among theirs (a search of megabytes for
        each of the files the validation gate parses)."""
        if rel not in self._rels and not self._adopted:
            raise KeyError(rel)
        self.writer.drain()
        try:
            return self.writer.read(rel)
        except FileNotFoundError:
            raise KeyError(rel) from None

    def __contains__(self, rel) -> bool:
        return rel in self._rels or any(f"\n{rel}\n" in block for block in self._adopted)

    def __delitem__(self, rel: str) -> None:
        raise TypeError("a staged file cannot be taken back")

    def __iter__(self):
        yield from self._rels
        for block in self._adopted:
            yield from block[1:-1].split("\n")

    def __len__(self) -> int:
        return len(self._rels) + sum(block.count("\n") - 1 for block in self._adopted)

    def __reduce__(self):
        """Pickled as a plain dict of the bytes (the crash tests replay the publish stage)."""
        return dict, (dict(self.items()),)


def write_json_tree(staging: Path | str, files: Mapping[str, bytes], mode: str = "both") -> None:
    """Write ``files`` (relative path -> bytes) under ``<staging>/json/`` in the forms ``mode``
    names, durable on return (``TreeWriter``; every path is checked before anything is written)."""
    for rel, data in files.items():
        _check_file(rel, data, files, mode)
    writer = TreeWriter(staging, mode)
    try:
        for rel, data in files.items():
            writer.put(rel, data)
        writer.finish()
    except BaseException:
        writer.abort()
        raise


