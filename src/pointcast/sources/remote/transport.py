"""Requests to an upstream's mirrors: GETs checked against what the server declares, byte
ranges checked against the index, existence probes, and passes over the mirrors in priority
order, retried with a doubling backoff until the run's deadline.
"""

from __future__ import annotations

import logging
import time

import httpx

from ... import __version__
from ..base import Mirror

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
# The project has no public home page yet: the agent names the program and its version only.
USER_AGENT = f"pointcast/{__version__} (point forecasts from open NWP data)"


class SourceUnavailable(RuntimeError):
    """No usable run or file before the deadline; the message says why. Retrying is pointless
    (the source has retried until its deadline)."""


class BadDownload(RuntimeError):
    """A response that is not what the index promised (length, GRIB structure, decoding)."""


class Missing(RuntimeError):
    """404/410: not (yet) published on this mirror."""


class Failed(RuntimeError):
    """A pass over the mirrors in which none succeeded: what each answered (``errors``), how
    many said "not found" (``missing``) and whether all of them did (``everywhere``)."""

    def __init__(self, what: str, errors: list[str], missing: int, mirrors: int):
        super().__init__(f"{what}: {'; '.join(errors)}")
        self.what, self.errors, self.missing = what, errors, missing
        self.everywhere = missing == mirrors


def new_client(timeout_seconds: float, connections: int) -> httpx.Client:
    """An HTTP client for ``connections`` parallel downloads."""
    return httpx.Client(timeout=timeout_seconds, follow_redirects=True,
                        headers={"User-Agent": USER_AGENT},
                        limits=httpx.Limits(max_connections=connections + 2))


def get(client: httpx.Client, url: str, headers: dict | None = None) -> httpx.Response:
    """GET ``url``: ``Missing`` for 404/410, ``BadDownload`` when the body is not as long as the
    server says."""
    r = client.get(url, headers=headers)
    if r.status_code in (404, 410):
        raise Missing(url)
    r.raise_for_status()
    declared = r.headers.get("Content-Length")
    if declared is not None and "Content-Encoding" not in r.headers \
            and int(declared) != len(r.content):
        raise BadDownload(f"{len(r.content)} bytes received, Content-Length {declared}")
    return r


def get_ranges(client: httpx.Client, url: str,
               ranges: list[tuple[int, int | None]], whole: bool) -> bytes:
    """The bytes of ``ranges`` of ``url``, one request per range; each range's length is
    checked against the index (an open end: against the file's length)."""
    if whole:
        return get(client, url).content
    parts = []
    for off, length in ranges:
        last = "" if length is None else str(off + length - 1)
        r = get(client, url, {"Range": f"bytes={off}-{last}"})
        body = r.content
        if r.status_code == 206:
            got = r.headers.get("Content-Range", "")
            if not got.startswith(f"bytes {off}-"):
                raise BadDownload(f"asked for bytes {off}-{last}, got {got!r}")
            total = got.rpartition("/")[2]
            expected = (length if length is not None
                        else int(total) - off if total.isdigit() else len(body))
        else:  # the server ignored Range and sent the whole file
            body = body[off:] if length is None else body[off:off + length]
            expected = len(body) if length is None else length
        if len(body) != expected:
            raise BadDownload(f"bytes {off}-{last}: {len(body)} received, the index says "
                              f"{expected}")
        parts.append(body)
    return b"".join(parts)


def exists(client: httpx.Client, url: str) -> None:
    """Raise ``Missing`` unless ``url`` exists (S3 answers 403 for a missing key)."""
    r = client.head(url)
    if r.status_code in (403, 405, 501):  # no HEAD here: ask for the first byte
        r = client.get(url, headers={"Range": "bytes=0-0"})
    if r.status_code in (403, 404, 410):
        raise Missing(url)
    r.raise_for_status()


def one_pass(what: str, mirrors: tuple[Mirror, ...], attempt):
    """``attempt(mirror)`` on each mirror in priority order until one succeeds; raises
    ``Failed`` (what each mirror answered) when none does."""
    errors, missing = [], 0
    for mirror in mirrors:
        try:
            return attempt(mirror)
        except Missing:
            errors.append(f"{mirror.name}: not found")
            missing += 1
        except (httpx.HTTPError, BadDownload) as exc:
            errors.append(f"{mirror.name}: {type(exc).__name__}: {exc}")
            log.debug("%s from %s: %s", what, mirror.url, exc)
    raise Failed(what, errors, missing, len(mirrors))


def retrying(what: str, mirrors: tuple[Mirror, ...], deadline: float, attempt, *,
             retry_seconds: float, wait_minutes: float, retry_missing: bool = True):
    """``one_pass`` again after a backoff until it succeeds or the deadline passes. With
    ``retry_missing`` False a pass in which some mirror answered "not found" (and none
    succeeded) ends at once with ``Missing``: only mirrors that all failed are worth
    waiting for."""
    delay = retry_seconds
    while True:
        try:
            return one_pass(what, mirrors, attempt)
        except Failed as failed:
            if failed.missing and not retry_missing:
                raise Missing(what) from None
            if time.monotonic() + delay > deadline:
                raise gave_up(failed, wait_minutes) from None
        time.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)


def gave_up(failed: Failed, wait_minutes: float, more: int = 0) -> SourceUnavailable:
    """The error of a file still failing at the deadline (``more``: how many others are)."""
    return SourceUnavailable(f"{failed.what}: gave up at the deadline ({wait_minutes:g} "
                             f"min): {'; '.join(failed.errors)}"
                             + (f" (and {more} more files failing)" if more else ""))
