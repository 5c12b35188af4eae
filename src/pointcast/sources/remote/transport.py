"""Requests to an upstream's mirrors: GETs checked against what the server declares, byte
ranges checked against the index, existence probes, and passes over the mirrors in priority
order, retried with a doubling backoff until the run's deadline, or until the source's
``unreachable_minutes`` when no mirror can even be connected to (a name that does not
resolve, a connection refused): a host that cannot be reached is no run being published.
Each failed pass is logged at INFO with what every mirror answered and when the next try is;
the backoff is a wait the cycle's stop wakes (`pointcast.stopping`).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx

from ... import __version__, stopping
from ..base import Mirror
from .progress import logger as _logger

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
    many said "not found" (``missing``), whether all of them did (``everywhere``) and whether
    none could be connected to (``unreachable``)."""

    def __init__(self, what: str, errors: list[str], missing: int, mirrors: int,
                 unconnected: int = 0):
        super().__init__(f"{what}: {'; '.join(errors)}")
        self.what, self.errors, self.missing = what, errors, missing
        self.everywhere = missing == mirrors
        self.unreachable = unconnected == mirrors > 0


# What a client raises when it cannot open a connection at all: a name that does not resolve,
# a connection refused or never answered.
UNCONNECTED = (httpx.ConnectError, httpx.ConnectTimeout)


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
    errors, missing, unconnected = [], 0, 0
    for mirror in mirrors:
        stopping.check()
        try:
            return attempt(mirror)
        except Missing:
            errors.append(f"{mirror.name}: not found")
            missing += 1
        except UNCONNECTED as exc:
            errors.append(f"{mirror.name}: cannot connect to {urlsplit(mirror.url).netloc}: "
                          f"{type(exc).__name__}: {exc}")
            unconnected += 1
        except (httpx.HTTPError, BadDownload) as exc:
            errors.append(f"{mirror.name}: {type(exc).__name__}: {exc}")
            log.debug("%s from %s: %s", what, mirror.url, exc)
    raise Failed(what, errors, missing, len(mirrors), unconnected)


def retrying(what: str, mirrors: tuple[Mirror, ...], deadline: float, attempt, *,
             retry_seconds: float, wait_minutes: float, unreachable_minutes: float,
             retry_missing: bool = True):
    """``one_pass`` again after a backoff until it succeeds or the deadline passes, or until
    no mirror could be connected to for ``unreachable_minutes``. With ``retry_missing`` False
    a pass in which some mirror answered "not found" (and none succeeded) ends at once with
    ``Missing``: only mirrors that all failed are worth waiting for."""
    delay = retry_seconds
    unreachable = Unreachable(unreachable_minutes)
    while True:
        try:
            return one_pass(what, mirrors, attempt)
        except Failed as failed:
            if failed.missing and not retry_missing:
                raise Missing(what) from None
            unreachable.seen(failed)
            if time.monotonic() + delay > deadline:
                raise gave_up(failed, wait_minutes) from None
            retry_later(failed, delay)
        stopping.pause(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)


class Unreachable:
    """How long no mirror could be connected to, pass after pass: `seen` raises
    ``SourceUnavailable`` once it is ``minutes``, and forgets as soon as one answers."""

    def __init__(self, minutes: float):
        self.minutes = minutes
        self.since: float | None = None

    def seen(self, failed: Failed | None) -> None:
        """A pass ended: ``failed`` when nothing succeeded in it (None when something did)."""
        if failed is None or not failed.unreachable:
            self.since = None
            return
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if now - self.since >= self.minutes * 60.0:
            raise SourceUnavailable(f"{failed.what}: no mirror reachable for "
                                    f"{self.minutes:g} min (unreachable_minutes): "
                                    f"{'; '.join(failed.errors)}")


def retry_later(failed: Failed, delay: float, more: int = 0) -> None:
    """Say at INFO, as it happens, what a failed pass met and when the next one is."""
    at = datetime.now(UTC) + timedelta(seconds=delay)
    _logger().info("%s: %s%s; next try in %.3g s (%s UTC)", failed.what, "; ".join(failed.errors),
                   f" (and {more} more files failing)" if more else "", delay, f"{at:%H:%M:%S}")


def gave_up(failed: Failed, wait_minutes: float, more: int = 0) -> SourceUnavailable:
    """The error of a file still failing at the deadline (``more``: how many others are)."""
    return SourceUnavailable(f"{failed.what}: gave up at the deadline ({wait_minutes:g} "
                             f"min): {'; '.join(failed.errors)}"
                             + (f" (and {more} more files failing)" if more else ""))
