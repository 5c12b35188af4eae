"""The HTTP adapter: one HTTP/1.1 connection (an ``asyncio.Protocol``) parsed by httptools'
public ``HttpRequestParser`` and answered by an ASGI app (``scope``, ``receive``, ``send``).

What it adds to an ASGI server's usual work is one thing: the app's coroutine is driven by
hand (``coro.send(None)``), and only a coroutine that really suspends is handed to the loop
as a task. ``PointcastApp`` answers from memory without suspending, so a request costs no
task, no event-loop turn and no per-request cycle object (docs/performance.md, "Server").

It offers ASGI's zero-copy send (``http.response.zerocopysend``) where the system has
``sendfile``: the head goes out with ``MSG_MORE`` and the body from the file's pages straight
to the socket, so a large kept answer is not copied out of Python's memory for every request
(docs/performance.md, "Server").

Requests on a connection are answered one at a time, in order: a pipelined request waits in
``_queue`` while an earlier answer is in flight or the transport's write buffer is above its
high-water mark (``pause_writing``), and reading pauses meanwhile, so neither input nor
output piles up. A request the parser refuses, or one over the limits, gets the API's JSON
400 (``400_002``) after the answers before it, and the connection closes."""

from __future__ import annotations

import asyncio
import collections
import email.utils
import http
import logging
import os
import socket
import time
import types
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import httptools

from .errors import ApiError
from .responses import error_response

log = logging.getLogger(__name__)

MAX_TARGET_BYTES = 65_535
"""The longest request target (path and query); uvicorn's httptools path refused 64 KiB too."""
MAX_HEADER_BYTES = 65_536
"""The request's header names and values together."""
MAX_HEADERS = 100
MAX_BODY_BYTES = 1 << 20
"""Request bodies are read and handed to the app whole (no operation reads one)."""

ASGI = {"version": "3.0", "spec_version": "2.3"}
ZERO_COPY = "http.response.zerocopysend"
EXTENSIONS: dict[str, dict] = {ZERO_COPY: {}} if hasattr(os, "sendfile") and hasattr(socket, "MSG_MORE") else {}
METHODS = {m.encode(): m for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")}
NO_BODY_STATUSES = frozenset({204, 304})
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LINGER_SECONDS = 2.0
COPY_BYTES = 16_384
"""A body shorter than this is joined to its head for one write; a longer one is written
beside it (``writelines``) instead of copied."""


def _read(fd: int, offset: int, count: int) -> bytes:
    """``count`` bytes of a file from ``offset``; an error if it ends before them."""
    data = os.pread(fd, count, offset)
    while len(data) < count:
        more = os.pread(fd, count - len(data), offset + len(data))
        if not more:
            raise RuntimeError("the file ended before the count of its zero-copy send")
        data += more
    return data


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase.encode())


STATUS_LINES = {status.value: _status_line(status.value) for status in http.HTTPStatus}

_date: list[Any] = [0, b""]  # the second and its Date header line, made once a second


def date_line() -> bytes:
    now = int(time.time())
    if now != _date[0]:
        _date[0], _date[1] = now, b"date: %s\r\n" % email.utils.formatdate(now, usegmt=True).encode()
    return _date[1]


_rendered: dict[tuple, tuple[int | None, bool, bytes]] = {}
RENDERED_HEADERS = 512  # header lists kept rendered; the cache starts afresh when full


def rendered_headers(headers: Any) -> tuple[int | None, bool, bytes]:
    """An app's response headers as (their Content-Length, whether they ask to close, their
    lines but ``connection``, which the adapter writes itself). Names are lowercase, as ASGI
    asks of the app. Kept by value: an app answering again with the same headers (the kept
    answers do, for a second) costs a look-up."""
    try:
        key = tuple(headers)
        entry = _rendered.get(key)
    except TypeError:  # headers as lists, not tuples: rendered every time
        key, entry = None, None
    if entry is not None:
        return entry
    fields = dict(headers)  # for the look-ups only
    declared = fields.get(b"content-length")
    connection = fields.get(b"connection")
    if connection is not None:
        headers = [(name, value) for name, value in headers if name != b"connection"]
    lines = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    if lines.count(b"\n") != len(headers) or lines.count(b"\r") != len(headers):
        raise RuntimeError("a response header holds CR or LF")
    entry = (None if declared is None else int(declared), connection is not None and connection.lower() == b"close", lines)
    if key is not None:
        if len(_rendered) >= RENDERED_HEADERS:
            _rendered.clear()
        _rendered[key] = entry
    return entry


class Refused(Exception):
    """A request the adapter will not hand to the app: answered 400_002, then the connection closes."""


def bad_request(message: str) -> bytes:
    """The API's JSON 400 as whole response bytes, closing the connection."""
    response = error_response(ApiError(400, "400_002", message))
    head = [STATUS_LINES[400], date_line(), b"connection: close\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in response.headers]
    return b"".join(head) + b"\r\n" + response.body


INTERNAL_ERROR = error_response(ApiError(500, "500_001", "internal error"))


@types.coroutine
def _carry_on(coro, yielded):
    """What a task would have done with ``coro`` after its first step yielded ``yielded``: pass
    each yield out to the task and each result (or exception) back in."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # noqa: BLE001 (a cancellation too: the app gets it)
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def _finish(coro, yielded) -> None:
    await _carry_on(coro, yielded)


class _Stop(Exception):
    """Raised in a parser callback to leave the rest of the bytes unparsed."""


class HttpProtocol(asyncio.Protocol):
    """One client connection. ``server`` keeps the open connections (``connections``) and the
    ``keep_alive_timeout``; ``app`` is the ASGI app."""

    def __init__(self, app: Callable[..., Any], server: Any):
        self.app = app
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.client: tuple[str, int] | None = None
        self.sockname: tuple[str, int] | None = None
        self._queue: collections.deque = collections.deque()  # (scope, body, keep_alive) or a Refused
        self._busy = False  # an app's coroutine is suspended and a task carries it on
        self._reading_done = False  # no further request is read: close once the queue is answered
        self._lingering = False
        self._reading_paused = False
        self._writing_paused = False
        self._drained: asyncio.Future | None = None
        self._disconnected: asyncio.Future | None = None
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None
        # the request being parsed
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._expect_continue = False
        self._scope: dict = {}
        self._keep_alive_parsed = True
        # the request being answered
        self._request: dict = {}
        self._request_body = b""
        self._body_given = False
        self._keep_alive = True
        self._head_request = False
        self._status = 0
        self._response_headers: Any = ()
        self._started = False  # http.response.start received
        self._head_sent = False
        self._framing = b""  # b"length", b"chunked", b"close" or b"" (no body)
        self._remaining = 0  # body bytes the Content-Length still promises
        self._complete = False
        self._socket: socket.socket | None = None  # the connection's socket, for zero-copy sends

    # -- connection

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._sent = self.loop.create_future()
        self._sent.set_result(None)
        self.client = transport.get_extra_info("peername")
        self.sockname = transport.get_extra_info("sockname")
        self.server.connections.add(self)
        self._last_read = self.loop.time()
        self._timer = self.loop.call_later(self.server.keep_alive_timeout, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self._socket is not None:
            self._socket.close()
        self._reading_done = True
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
        for waiter in (self._drained, self._disconnected):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self._reading_done:
            return
        self._last_read = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # the upgrade is not taken: the request was answered and reading is done
        except httptools.HttpParserError as exc:
            if not self._reading_done:
                refused = exc.__context__
                self._queue.append(refused if isinstance(refused, Refused) else Refused("malformed HTTP request"))
                self._stop_reading()
                self._next()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if not self._busy:
            self._next()

    def idle(self) -> bool:
        """Nothing received is left to answer (a request received in part counts as nothing)."""
        return not (self._busy or self._queue)

    def shutdown(self) -> None:
        """The server stops: answer what is received, then close."""
        self._stop_reading()
        if self.idle():
            self.transport.close()

    def _stop_reading(self) -> None:
        self._reading_done = True
        if not self._reading_paused and not self.transport.is_closing():
            self._reading_paused = True
            self.transport.pause_reading()

    def _check_idle(self) -> None:
        """Close the connection once nothing has arrived for the keep-alive timeout while
        there was nothing to answer (between requests, or a request stalled halfway)."""
        timeout = self.server.keep_alive_timeout
        due = self._last_read + timeout
        now = self.loop.time()
        if now >= due and self.idle() and not self._writing_paused:
            self.transport.close()
        else:
            self._timer = self.loop.call_later(due - now if now < due else timeout, self._check_idle)

    # -- parser callbacks

    def on_message_begin(self) -> None:
        if self._reading_done:
            raise _Stop
        self._url = b""
        self._headers = []
        self._header_bytes = 0
        self._body = []
        self._body_bytes = 0
        self._expect_continue = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_TARGET_BYTES:
            raise Refused("request target of 64 KiB or more")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        if self._header_bytes > MAX_HEADER_BYTES or len(self._headers) >= MAX_HEADERS:
            raise Refused(f"request headers over {MAX_HEADER_BYTES} bytes or {MAX_HEADERS} lines")
        name = name.lower()
        if name == b"content-length":
            if value.isdigit() and int(value) > MAX_BODY_BYTES:
                raise Refused(f"request body over {MAX_BODY_BYTES} bytes")
        elif name == b"expect":
            self._expect_continue = value.lower() == b"100-continue"
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        parser = self.parser
        method = parser.get_method()
        url = self._url
        if url[:1] == b"/":
            raw_path, _, query = url.partition(b"?")
        elif url == b"*":
            raw_path, query = url, b""
        else:  # the absolute form
            try:
                parsed = httptools.parse_url(url)
            except httptools.HttpParserInvalidURLError:
                raise Refused("malformed request target") from None
            raw_path, query = parsed.path or b"/", parsed.query or b""
        version = parser.get_http_version()
        headers = self._headers
        self._keep_alive_parsed = version != "1.0" and parser.should_keep_alive() and not parser.should_upgrade()
        self._scope = {
            "type": "http",
            "asgi": ASGI,
            "http_version": version,
            "method": METHODS.get(method) or method.decode("latin-1"),
            "scheme": "http",
            "path": unquote(raw_path.decode("latin-1")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": headers,
            "client": self.client,
            "server": self.sockname,
            "extensions": EXTENSIONS,
        }
        if self._expect_continue and version == "1.1" and self.idle():
            self.transport.write(CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > MAX_BODY_BYTES:
            raise Refused(f"request body over {MAX_BODY_BYTES} bytes")
        self._body.append(body)

    def on_message_complete(self) -> None:
        parts = self._body
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        keep_alive = self._keep_alive_parsed
        if not keep_alive:
            self._stop_reading()
        if self._busy or self._writing_paused or self._queue or not keep_alive:
            self._queue.append((self._scope, body, keep_alive))
            self._next()
        else:  # nothing ahead of it: answered at once
            self._run(self._scope, body, keep_alive)
            if not self._keep_alive:  # the answer ended the connection
                self._next()

    # -- answering

    def _next(self) -> None:
        """Answer the queued requests while nothing holds them back; close when reading is
        done and all is answered."""
        queue = self._queue
        transport = self.transport
        while queue and not (self._busy or self._writing_paused):
            item = queue.popleft()
            if isinstance(item, Refused):
                queue.clear()
                transport.write(bad_request(str(item)))
                break
            self._run(*item)
            if transport.is_closing():
                return
        if self._busy or transport.is_closing() or self._lingering:
            return
        if queue:
            if not self._reading_paused:
                self._reading_paused = True  # the queue holds at most what one read brought
                transport.pause_reading()
        elif self._reading_done:
            self._linger()
        elif self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def _linger(self) -> None:
        """Close after the last answer: send FIN, then read and drop whatever the client still
        sends until it closes (at most ``LINGER_SECONDS``). Closing at once with unread bytes
        would reset the connection, and a reset can destroy the answer still in flight."""
        self._lingering = True
        self.transport.write_eof()
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _run(self, scope: dict, body: bytes, keep_alive: bool) -> None:
        self._request = scope
        self._request_body = body
        self._keep_alive = keep_alive
        self._head_request = scope["method"] == "HEAD"
        self._body_given = self._started = self._head_sent = self._complete = False
        coro = self.app(scope, self._receive, self._send)
        try:
            yielded = coro.send(None)
        except StopIteration:
            self._done()
        except BaseException as exc:  # noqa: BLE001 (an app's bug answers 500; the server stays up)
            self._done(exc)
        else:  # the app waits for something: a task carries it on
            self._busy = True
            self.loop.create_task(_finish(coro, yielded)).add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._busy = False
        self._done(None if task.cancelled() else task.exception())
        self._next()

    def _done(self, exc: BaseException | None = None) -> None:
        """The app has returned (or raised ``exc``): end the response and the request."""
        if exc is not None:
            log.error("the app raised answering %s %s", self._request.get("method"), self._request.get("path"),
                      exc_info=exc)
        if self.transport.is_closing():
            return
        if not self._head_sent:  # nothing written yet: the JSON 500
            if exc is None:
                log.error("the app returned without answering %s %s", self._request["method"], self._request["path"])
            self._status, self._response_headers, self._started = INTERNAL_ERROR.status, INTERNAL_ERROR.headers, True
            self._write(INTERNAL_ERROR.body, False)
        if not (self._complete and self._keep_alive):  # a body cut short: only closing tells the client
            self._stop_reading()
            self._queue.clear()

    async def _receive(self) -> dict:
        if not self._body_given:
            self._body_given = True
            return {"type": "http.request", "body": self._request_body, "more_body": False}
        if not (self._complete or self.transport.is_closing()):
            if self._disconnected is None or self._disconnected.done():
                self._disconnected = self.loop.create_future()
            await self._disconnected
        return {"type": "http.disconnect"}

    def _send(self, message: dict) -> asyncio.Future:
        """ASGI's ``send``: an awaitable callable. It writes at once and returns a future that is
        already done (awaiting it does not suspend), or, when a streamed body meets a full
        write buffer, the future of the buffer's draining."""
        kind = message["type"]
        if kind == "http.response.body":
            if not self._started or self._complete:
                raise RuntimeError("http.response.body outside a response")
            more = message.get("more_body", False)
            self._write(message.get("body", b""), more)
            if more and self._writing_paused and not self.transport.is_closing():
                self._drained = self.loop.create_future()
                return self._drained
        elif kind == ZERO_COPY and EXTENSIONS:
            if not self._started or self._complete:
                raise RuntimeError(f"{ZERO_COPY} outside a response")
            self._write_file(message["file"], message.get("offset"), message.get("count"),
                             message.get("more_body", False))
        elif kind == "http.response.start":
            if self._started:
                raise RuntimeError("http.response.start sent twice")
            self._status = message["status"]
            self._response_headers = message.get("headers", ())
            self._started = True
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r}")
        return self._sent

    def _write(self, body: bytes, more: bool) -> None:
        """Write the head (with the first body) and ``body``, framed as the response says."""
        transport = self.transport
        if transport.is_closing():  # the client went away: the answer goes nowhere
            return
        if self._head_sent:
            data = self._frame(body, more)
            if data:
                transport.write(data)
        else:
            head = self._head(len(body), more)
            data = self._frame(body, more) if self._framing else b""
            if len(data) < COPY_BYTES:
                transport.write(head + data)
            else:  # one writev, no copy of a large body
                transport.writelines((head, data))
        self._ended(more)

    def _write_file(self, file: Any, offset: int | None, count: int | None, more: bool) -> None:
        """``count`` bytes of ``file`` from ``offset`` (ASGI's zero-copy send: without an
        offset, from the file's position, which moves past them; without a count, to its end).

        With a Content-Length framing and nothing waiting in the transport's buffer, the head
        is sent with ``MSG_MORE`` and the body by ``os.sendfile``; whatever the socket does not
        take at once, and every other case, goes through the transport as bytes read from the
        file, so the order on the wire is kept."""
        fd = file.fileno()
        position = offset is None
        if offset is None:
            offset = os.lseek(fd, 0, os.SEEK_CUR)
        if count is None:
            count = max(0, os.fstat(fd).st_size - offset)
        transport = self.transport
        if position:
            os.lseek(fd, offset + count, os.SEEK_SET)
        if transport.is_closing():
            return
        head = b"" if self._head_sent else self._head(count, more)
        if self._framing != b"length" or transport.get_write_buffer_size() or not count:
            if head:
                transport.write(head)
            self._write(_read(fd, offset, count) if self._framing else b"", more)
            return
        if count > self._remaining:
            raise RuntimeError("response body longer than its Content-Length")
        self._remaining -= count
        sock = self._socket
        if sock is None:  # a second socket object on the connection's descriptor (a dup)
            sock = self._socket = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
        head_sent = sent = 0
        try:
            if head:
                head_sent = sock.send(head, socket.MSG_MORE)
            while head_sent == len(head) and sent < count:
                done = os.sendfile(sock.fileno(), fd, offset + sent, count - sent)
                if not done:  # the file ended: ``_read`` below says so
                    break
                sent += done
        except BlockingIOError:  # the socket is full: the rest goes through the transport
            pass
        except OSError:  # the client went away
            transport.abort()
            return
        if head_sent < len(head):
            transport.write(head[head_sent:])
        if sent < count:
            transport.write(_read(fd, offset + sent, count - sent))
        self._ended(more)

    def _ended(self, more: bool) -> None:
        if not more:
            self._complete = self._framing != b"length" or self._remaining == 0
            if self._framing == b"close":
                self._keep_alive = False
            if self._disconnected is not None and not self._disconnected.done():
                self._disconnected.set_result(None)

    def _head(self, length: int, more: bool) -> bytes:
        """The status line and headers; decides the framing (Content-Length, chunked, or the
        connection's end) and whether the connection stays open. ``length``: the body's bytes
        when the app gives no Content-Length and sends it whole."""
        status = self._status
        declared, close, fields = rendered_headers(self._response_headers)
        if close:
            self._keep_alive = False
        extra = b""
        if self._head_request or status in NO_BODY_STATUSES or status < 200:
            self._framing = b""
        elif declared is not None:
            self._framing, self._remaining = b"length", declared
        elif not more:
            self._framing, self._remaining = b"length", length
            extra = b"content-length: %d\r\n" % length
        elif self._keep_alive:
            self._framing = b"chunked"
            extra = b"transfer-encoding: chunked\r\n"
        else:
            self._framing = b"close"
        if not self._keep_alive:
            extra += b"connection: close\r\n"
        self._head_sent = True
        return b"".join((STATUS_LINES.get(status) or _status_line(status), date_line(), fields, extra, b"\r\n"))

    def _frame(self, body: bytes, more: bool) -> bytes:
        framing = self._framing
        if framing == b"length":
            if len(body) > self._remaining:
                raise RuntimeError("response body longer than its Content-Length")
            self._remaining -= len(body)
            return body
        if framing == b"chunked":
            chunk = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            return chunk if more else chunk + b"0\r\n\r\n"
        return body if framing else b""
