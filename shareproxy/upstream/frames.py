"""Upstream connections that read each response frame with one copy at most.

aiokafka's connection reads frames through an ``asyncio.StreamReader``: every received chunk is
appended to a bytearray (a copy, and a reallocation as it grows), ``readexactly`` copies the
frame out of it, and a frame bigger than the reader's limit pauses and resumes the socket on
every chunk. A Fetch response is megabytes of record batches the proxy only passes on, so
``FrameReader`` keeps the chunks as the transport made them and joins only what a frame needs
(a frame that is exactly one chunk is handed over as it came).

What this relies on, pinned by ``tests/unit/test_upstream_frames.py``:

- aiokafka 0.14's ``AIOKafkaConnection.connect`` (copied below with the reader swapped) and the
  attributes it sets; its ``_read`` loop, which only calls ``readexactly`` on the reader, and
  ``connected``, which calls ``at_eof``.
- asyncio's ``StreamReader`` internals the base class keeps using: ``_eof``, ``_exception``,
  ``_limit``, ``_paused``, ``_transport``, ``_waiter``, ``_wakeup_waiter`` and
  ``_wait_for_data`` (which resumes a paused transport before waiting).
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka.conn import READER_LIMIT, AIOKafkaConnection, AIOKafkaProtocol
from aiokafka.util import create_future


class FrameReader(asyncio.StreamReader):
    """A StreamReader for ``readexactly`` alone: received chunks are kept in a deque, not
    copied into one buffer; a read joins the chunks it spans, once. The reader task is woken
    only when what it waits for has arrived, and reading is paused only beyond what it waits
    for by twice the limit, so a big frame streams in without pausing the socket."""

    # asyncio.StreamReader's own state and helpers, which typeshed leaves undeclared
    _eof: bool
    _exception: BaseException | None
    _limit: int
    _paused: bool
    _transport: asyncio.ReadTransport | None
    _wakeup_waiter: Callable[[], None]
    _wait_for_data: Callable[[str], Awaitable[None]]

    def __init__(
        self, limit: int = READER_LIMIT, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        super().__init__(limit=limit, loop=loop)
        self._chunks: collections.deque[bytes] = collections.deque()
        self._held = 0  # bytes in _chunks not read yet
        self._head = 0  # bytes of _chunks[0] already read
        self._want = 0  # bytes the waiting readexactly needs

    def feed_data(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        assert not self._eof, "feed_data after feed_eof"
        if not data:
            return
        if type(data) is not bytes:  # the transports pass bytes; anything else may be reused
            data = bytes(data)
        self._chunks.append(data)
        self._held += len(data)
        if self._held >= self._want:
            self._wakeup_waiter()
        if (
            self._transport is not None
            and not self._paused
            and self._held > self._want + 2 * self._limit
        ):
            try:
                self._transport.pause_reading()
            except NotImplementedError:
                self._transport = None
            else:
                self._paused = True

    def at_eof(self) -> bool:
        return self._eof and not self._held

    def _maybe_resume_transport(self) -> None:
        if self._paused and self._held <= self._limit:
            self._paused = False
            assert self._transport is not None
            self._transport.resume_reading()

    async def readexactly(self, n: int) -> bytes:
        if self._exception is not None:
            raise self._exception
        if n < 0:
            raise ValueError("readexactly size can not be less than zero")
        if n == 0:
            return b""
        while self._held < n:
            if self._eof:
                partial = self._take(self._held)
                raise asyncio.IncompleteReadError(partial, n)
            self._want = n
            try:
                await self._wait_for_data("readexactly")
            finally:
                self._want = 0
        data = self._take(n)
        self._maybe_resume_transport()
        return data

    def _take(self, n: int) -> bytes:
        """The next ``n`` held bytes (n <= held), copied once at most."""
        if n == 0:
            return b""
        chunks, head = self._chunks, self._head
        first = chunks[0]
        self._held -= n
        rest = len(first) - head
        if n < rest:
            self._head = head + n
            return first[head : head + n]
        chunks.popleft()
        self._head = 0
        if n == rest:
            return first if head == 0 else first[head:]
        parts: list[bytes | memoryview] = [memoryview(first)[head:] if head else first]
        need = n - rest
        while need:
            chunk = chunks[0]
            if len(chunk) <= need:
                parts.append(chunks.popleft())
                need -= len(chunk)
            else:
                parts.append(memoryview(chunk)[:need])
                self._head = need
                need = 0
        return b"".join(parts)

    async def read(self, n: int = -1) -> bytes:
        raise NotImplementedError("FrameReader serves readexactly only")

    async def readline(self) -> bytes:
        raise NotImplementedError("FrameReader serves readexactly only")

    async def readuntil(self, separator: Any = b"\n") -> bytes:
        raise NotImplementedError("FrameReader serves readexactly only")


class FrameConnection(AIOKafkaConnection):
    """aiokafka's connection, reading with a ``FrameReader``: ``connect`` is aiokafka 0.14's
    with the reader swapped, everything else (version lookup, SASL, the read loop) is its own."""

    async def connect(self) -> tuple[Any, Any]:
        loop = self._loop
        self._closed_fut = create_future()
        if self._security_protocol in ["PLAINTEXT", "SASL_PLAINTEXT"]:
            ssl = None
        else:
            assert self._security_protocol in ["SSL", "SASL_SSL"]
            assert self._ssl_context is not None
            ssl = self._ssl_context
        reader = FrameReader(limit=READER_LIMIT, loop=loop)
        protocol = AIOKafkaProtocol(self._closed_fut, reader, loop=loop)
        async with asyncio.timeout(self._request_timeout):
            transport, _ = await loop.create_connection(
                lambda: protocol, self.host, self.port, ssl=ssl
            )
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        self._reader, self._writer, self._protocol = reader, writer, protocol
        self._read_task = self._create_reader_task()
        if self._max_idle_ms is not None:
            self._idle_handle = loop.call_soon(self._idle_check, weakref.ref(self))
        try:
            await self._do_version_lookup()
            if self._security_protocol in ["SASL_SSL", "SASL_PLAINTEXT"]:
                await self._do_sasl_handshake()
        except BaseException:
            self.close()
            raise
        return reader, writer


async def open_connection(host: str, port: int, **options: Any) -> AIOKafkaConnection:
    """``aiokafka.conn.create_conn``'s counterpart: a connected ``FrameConnection``."""
    conn = FrameConnection(host, port, **options)
    await conn.connect()
    return conn
