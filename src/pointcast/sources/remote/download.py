"""Downloading a run's files in passes over the connections, each download verified.

Per file, the index (when the layout has one) is read and only the messages of the model's
table are downloaded, with ``Range`` requests (``index``); a file without an index is
downloaded whole. A download counts only when its length is the index's (or
``Content-Length``) and every message in it is whole, section by section (``check_grib``); otherwise
(404, 5xx, timeouts, truncated or corrupt bodies) the next mirror is tried. A file no mirror
gave is tried again in the next pass, after a backoff (``retry_seconds``, doubling up to
``MAX_BACKOFF_S``), so a failing file never holds a connection while it waits. A file every
mirror answers "not found" for the source's ``missing_minutes`` is not published: it is returned apart
(``fetch`` decides what that means for the run). Passes in which no mirror could be connected to
for the source's ``unreachable_minutes`` end the fetch (``SourceUnavailable``). The cache keeps each download with its index
and a ``.json`` record of the byte ranges taken, so a file whose selection has not changed is
not downloaded again.
"""

from __future__ import annotations

import bz2
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import eccodes

from ... import stopping
from ...publish.durable import replace_bytes
from ..base import Layout, Mirror, ModelSpec, Need, Upstream
from .files import RemoteFile
from .index import wanted_ranges
from .progress import FetchProgress
from .transport import (
    MAX_BACKOFF_S,
    BadDownload,
    Failed,
    Unreachable,
    gave_up,
    get,
    get_ranges,
    one_pass,
    retry_later,
)

if TYPE_CHECKING:
    from .settings import HttpSettings

def grib_lengths(data: bytes) -> Iterator[tuple[int, int]]:
    """(offset, length) of each GRIB message in ``data`` by the lengths the messages declare;
    raises ``BadDownload`` when the bytes are not a sequence of whole messages."""
    pos = 0
    while pos < len(data):
        if data[pos:pos + 4] != b"GRIB" or len(data) - pos < 16:
            raise BadDownload(f"no GRIB message at byte {pos}")
        edition = data[pos + 7]
        if edition == 2:
            total = int.from_bytes(data[pos + 8:pos + 16], "big")
        elif edition == 1:
            total = int.from_bytes(data[pos + 4:pos + 7], "big")
        else:
            raise BadDownload(f"GRIB edition {edition} at byte {pos}")
        if total < 16 or pos + total > len(data):
            raise BadDownload(f"message at byte {pos} declares {total} bytes, "
                              f"{len(data) - pos} received")
        if data[pos + total - 4:pos + total] != b"7777":
            raise BadDownload(f"message at byte {pos} does not end with 7777")
        yield pos, total
        pos += total


def check_grib(data: bytes, expected: int | None = None) -> int:
    """Raise ``BadDownload`` unless ``data`` is whole GRIB messages (``expected`` bytes when
    given) whose sections are whole (`_check_sections`). Returns the number of messages.

    The values are not decoded here: the extraction decodes every message it reads anyway,
    and decoding each download a second time to check it cost as much again (a quarter of a
    cycle's CPU on many small messages). A damaged packed-value stream that keeps the
    structure whole fails the decode instead (docs/method.md, "Fetch")."""
    if expected is not None and len(data) != expected:
        raise BadDownload(f"{len(data)} bytes received, the index says {expected}")
    n = 0
    for pos, total in grib_lengths(data):
        _check_sections(data, pos, total)
        n += 1
    if n == 0:
        raise BadDownload("empty body")
    return n


def _check_sections(data: bytes, pos: int, total: int) -> None:
    """The message at ``pos`` (``total`` bytes) has its sections: GRIB2's section 1, then
    sections 2-7 (repeated in a message of several fields), each as long as it declares,
    the last one ending at ``7777`` (WMO Manual on Codes, FM 92 GRIB2). A GRIB1 message
    (whose sections ecCodes reads past damage in) is decoded, values included."""
    if data[pos + 7] != 2:
        try:
            h = eccodes.codes_new_from_message(data[pos:pos + total])
        except Exception as exc:  # ecCodes raises its own error classes
            raise BadDownload(f"message at byte {pos} does not decode: {exc}") from None
        try:
            eccodes.codes_get_values(h)
        except Exception as exc:
            raise BadDownload(f"message at byte {pos} does not decode: {exc}") from None
        finally:
            eccodes.codes_release(h)
        return
    at, end, number = pos + 16, pos + total - 4, 0
    while at < end:
        length = int.from_bytes(data[at:at + 4], "big")
        number = data[at + 4] if at + 5 <= end else 0
        if length < 5 or at + length > end or not (number == 1 if at == pos + 16 else 2 <= number <= 7):
            raise BadDownload(f"message at byte {pos}: no GRIB2 section at byte {at - pos} "
                              f"(number {number}, {length} bytes)")
        at += length
    if number != 7:
        raise BadDownload(f"message at byte {pos} has no data section (7)")


def download_files(src: HttpSettings, client, pool: ThreadPoolExecutor, model: ModelSpec,
                   up: Upstream, layout: Layout, todo: list[tuple[RemoteFile, Path]],
                   deadline: float, progress: FetchProgress, used: dict[str, int],
                   need: Need | None = None) -> tuple[dict[str, Path], list[RemoteFile]]:
    """Fetch the files of ``todo`` (file, cache path) in passes: a pass tries each pending
    file once on every mirror, on the pool's connections; the files that failed wait for
    the next pass, after a backoff, so that a failing file never holds a connection while
    it waits. A file every mirror answers "not found" for ``missing_minutes`` (or until the
    deadline, if sooner) is not published: it is returned apart, with the local paths of
    the others by remote path. Any other failure left at the deadline raises
    ``SourceUnavailable``."""
    done: dict[str, Path] = {}
    absent: list[RemoteFile] = []
    missing_since: dict[str, float] = {}
    grace = min(src.missing_minutes, src.wait_minutes) * 60.0
    lock = threading.Lock()
    delay = src.retry_seconds
    unreachable = Unreachable(src.unreachable_minutes)

    def one(item: tuple[RemoteFile, Path]) -> Path | Failed:
        stopping.check()  # the files still queued when the cycle is told to stop
        try:
            dest, nbytes, mirror = fetch_file(client, model, up, layout, *item, need, src.read_indexes)
        except Failed as failed:
            return failed
        with lock:
            if mirror:
                used[mirror] = used.get(mirror, 0) + 1
        progress.step(nbytes, cached=not mirror)
        return dest

    while todo:
        outcomes = list(pool.map(one, todo))
        now = time.monotonic()
        again: list[tuple[tuple[RemoteFile, Path], Failed]] = []
        for item, out in zip(todo, outcomes, strict=True):
            if not isinstance(out, Failed):
                done[item[0].path] = out
            elif out.everywhere and (item[0].optional  # a run can go without it
                                     or now - missing_since.setdefault(item[0].path, now) >= grace):
                absent.append(item[0])
            else:
                again.append((item, out))
        if not again:
            break
        # a pass where no file came and no mirror could be connected to: the host is unreachable
        unreachable.seen(again[0][1] if len(again) == len(todo) and all(
            out.unreachable for _, out in again) else None)
        if now + delay > deadline:
            failing = [out for _, out in again if not out.everywhere]
            if failing:
                raise gave_up(failing[0], src.wait_minutes, len(failing) - 1)
            absent += [item[0] for item, _ in again]  # "not found" up to the deadline
            break
        retry_later(again[0][1], delay, len(again) - 1)
        stopping.pause(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)
        todo = [item for item, _ in again]
    return done, absent


def fetch_file(client, model: ModelSpec, up: Upstream, layout: Layout,
               f: RemoteFile, dest: Path, need: Need | None = None,
               read_indexes: dict[str, str] | None = None) -> tuple[Path, int, str]:
    """Download one file's wanted messages (those of the rows ``need`` reads at its step, or
    of the whole table; or the whole file) into the cache at ``dest``, one pass over the
    mirrors (``Failed`` when none gives it): (local path, bytes downloaded, mirror name or
    "" when it came from the cache, or from another model's copy: `_shared_copy`). An index
    in ``read_indexes`` (by URL: read moments ago by `fetch.run_size`) is taken from there,
    not requested again."""
    meta = dest.with_name(dest.name + ".json")
    local_index = dest.with_name(Path(f.index_path).name) if f.index_path else None
    rows = None if need is None else need.rows_at(round(f.first_step_h * 60))
    dest.parent.mkdir(parents=True, exist_ok=True)
    if local_index is not None and local_index.exists():
        ranges = wanted_ranges(model, up, layout, local_index.read_text(), rows)
        if dest.exists() and file_meta(meta).get("ranges") == ranges_json(ranges):
            return dest, 0, ""
    elif local_index is None and dest.exists() and file_meta(meta).get("bytes") == dest.stat().st_size:
        return dest, 0, ""
    if local_index is not None and _shared_copy(model, up, layout, f, dest, local_index, rows):
        return dest, 0, ""

    def attempt(mirror: Mirror) -> tuple[str, bytes, str | None, list]:
        index_text = None
        ranges: list[tuple[int, int | None]] = [(0, None)]
        if f.index_path:
            url = f"{mirror.url}/{f.index_path}"
            index_text = (read_indexes or {}).pop(url, None) or get(client, url).text
            ranges = wanted_ranges(model, up, layout, index_text, rows)
        data = get_ranges(client, f"{mirror.url}/{f.path}", ranges, whole=not f.index_path)
        check_grib(bz2.decompress(data) if layout.compression == "bz2" else data)
        return mirror.name, data, index_text, ranges

    name, data, index_text, ranges = one_pass(f.path, up.mirrors, attempt)
    replace_bytes(dest, data, sync=False)
    if local_index is not None and index_text is not None:
        replace_bytes(local_index, index_text.encode(), sync=False)
    replace_bytes(meta, json.dumps({"mirror": name, "ranges": ranges_json(ranges),
                                   "bytes": len(data)}).encode(), sync=False)
    return dest, len(data), name


def _shared_copy(model: ModelSpec, up: Upstream, layout: Layout, f: RemoteFile, dest: Path,
                 local_index: Path, rows) -> bool:
    """Take ``f``'s wanted messages from another model's copy of the same file of the same
    run in the cache, where it holds them all (ENS's control is the IFS's ``oper-fc``
    message since IFS cycle 50r1, ``sources/ens.py``): the file is then fetched once. That
    copy holds the byte ranges its ``.json`` records, one after the other."""
    run_dir = dest.parents[len(Path(f.path).parts) - 1]
    for other in sorted(run_dir.parent.parent.glob(f"*/{run_dir.name}/{f.path}")):
        if other == dest or not other.exists():
            continue
        other_index = other.with_name(local_index.name)
        taken = file_meta(other.with_name(other.name + ".json")).get("ranges")
        if not taken or not other_index.exists():
            continue
        text = other_index.read_text()
        try:
            ranges = wanted_ranges(model, up, layout, text, rows)
        except BadDownload:
            continue
        data = other.read_bytes()
        starts, at = {}, 0  # each range the copy took -> where it lies in the copy
        for off, length in taken:
            starts[off] = (at, length)
            at += length if length is not None else len(data) - at
        parts = []
        for off, length in ranges:
            held = next(((o, a, n) for o, (a, n) in starts.items()
                         if n is not None and length is not None and o <= off and off + length <= o + n), None)
            if held is None:
                break
            o, a, _ = held
            parts.append(data[a + off - o:a + off - o + length])
        else:
            body = b"".join(parts)
            check_grib(body)
            replace_bytes(dest, body, sync=False)
            replace_bytes(local_index, text.encode(), sync=False)
            replace_bytes(dest.with_name(dest.name + ".json"), json.dumps(
                {"mirror": "", "shared_from": str(other.relative_to(run_dir.parent.parent)),
                 "ranges": ranges_json(ranges), "bytes": len(body)}).encode(), sync=False)
            return True
    return False


def ranges_json(ranges: list[tuple[int, int | None]]) -> list[list[int | None]]:
    return [[a, b] for a, b in ranges]


def file_meta(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
