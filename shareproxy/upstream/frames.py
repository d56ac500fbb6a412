"""Upstream connections that read each response frame with one copy at most.

aiokafka's connection reads frames through an ``asyncio.StreamReader``: every received chunk is
appended to a bytearray (a copy, and a reallocation as it grows), ``readexactly`` copies the
frame out of it, and a frame bigger than the reader's limit pauses and resumes the socket on
every chunk. A Fetch response is megabytes of record batches the proxy only passes on, so
``FrameReader`` keeps the chunks as the transport made them and joins only what a frame needs
(a frame that is exactly one chunk is handed over as it came). On a plain TCP transport a
``FrameProtocol`` feeds it whole frames, a big one received straight into its own buffer, and
every answer is read through a view (``decode_frame``) rather than aiokafka's copy into a
``BytesIO``.

What this relies on, pinned by ``tests/unit/test_upstream_frames.py``:

- aiokafka 0.14's ``AIOKafkaConnection.connect``, which makes a plain ``StreamReader``, hands
  it to the protocol and calls ``_create_reader_task`` before it sends anything: there the
  reader becomes a ``FrameReader`` (its class changed in place, so the protocol feeds the new
  one). Its ``_read`` loop only calls ``readexactly`` on the reader, and ``connected`` calls
  ``at_eof``. ``_handle_frame`` takes ``(correlation id, request, future)`` from the left of
  ``_requests``, and pops it once answered.
- asyncio's ``StreamReader`` internals the base class keeps using: ``_eof``, ``_exception``,
  ``_limit``, ``_paused``, ``_transport``, ``_waiter``, ``_wakeup_waiter`` and
  ``_wait_for_data`` (which resumes a paused transport before waiting).
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import errors as kafka_errors
from aiokafka.conn import READER_LIMIT, AIOKafkaConnection, CloseReason

from shareproxy.upstream.frame_protocol import FrameProtocol

_SIZE = struct.Struct(">i")


class FrameReader(asyncio.StreamReader):
    """A StreamReader for ``readexactly`` alone (an upstream connection's, and each client
    connection's on the Kafka listener): received chunks are kept in a deque, not copied into
    one buffer; a read joins the chunks it spans, once. The reader task is woken only when
    what it waits for has arrived, and reading is paused only beyond what it waits for by
    twice the limit, so a big frame streams in without pausing the socket."""

    # asyncio.StreamReader's own state and helpers, which typeshed leaves undeclared
    _eof: bool
    _exception: BaseException | None
    _limit: int
    _paused: bool
    _transport: asyncio.ReadTransport | None
    _wakeup_waiter: Callable[[], None]
    _wait_for_data: Callable[[str], Awaitable[None]]

    _buffer: bytearray

    def __init__(
        self, limit: int = READER_LIMIT, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        super().__init__(limit=limit, loop=loop)
        self._start_frames()

    def _start_frames(self) -> None:
        self._chunks: collections.deque[bytes | memoryview] = collections.deque()
        self._held = 0  # bytes in _chunks not read yet
        self._head = 0  # bytes of _chunks[0] already read
        self._want = 0  # bytes the waiting readexactly needs
        # takes a whole frame at once while nothing is held before it (see ``feed_frame``)
        self.direct: Callable[[bytes | memoryview], None] | None = None

    @classmethod
    def adopt(cls, reader: asyncio.StreamReader) -> FrameReader:
        """Turn a plain StreamReader that no one is reading yet into a FrameReader, in place:
        whoever feeds it (the protocol) keeps the same object."""
        if type(reader) is not asyncio.StreamReader:
            raise TypeError(f"a plain asyncio.StreamReader is adopted, not {type(reader)}")
        buffered = bytes(reader._buffer)  # type: ignore[attr-defined]
        reader._buffer.clear()  # type: ignore[attr-defined]
        reader.__class__ = cls
        adopted: FrameReader = reader  # type: ignore[assignment]
        adopted._start_frames()
        if buffered:
            adopted._chunks.append(buffered)
            adopted._held = len(buffered)
        return adopted

    def feed_data(self, data: bytes | bytearray | memoryview) -> None:  # type: ignore[override]
        assert not self._eof, "feed_data after feed_eof"
        if not data:
            return
        if type(data) is not bytes:  # the transports pass bytes; anything else may be reused
            data = bytes(data)
        self._append(data)

    def feed_frame(self, header: bytes, frame: bytes | memoryview) -> None:
        """A whole frame and its 4-byte size, kept as given: a big frame is a read-only view of
        the buffer it was received into, which nothing else holds or writes."""
        assert not self._eof, "feed_frame after feed_eof"
        if not frame:
            self.feed_data(header)
            return
        if self.direct is not None and not self._held and self._exception is None:
            # the read loop waits for a frame's size with nothing before this one: the frame
            # is handled here and now, not after a wake-up of the loop's task (each answer
            # relayed saves a round of the event loop)
            try:
                self.direct(frame)
            except Exception as exc:  # as the read loop fails: its task's end handles it
                self.set_exception(exc)
            return
        self._chunks.append(header)
        self._held += len(header)
        self._append(frame)

    def _append(self, chunk: bytes | memoryview) -> None:
        self._chunks.append(chunk)
        self._held += len(chunk)
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
    """aiokafka's connection reading with a ``FrameReader``, fed by a ``FrameProtocol`` on a
    plain TCP transport; everything else (connecting, the version lookup, SASL, the read loop,
    matching answers to requests) is aiokafka's own."""

    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter
    _protocol: asyncio.Protocol
    _requests: collections.deque[tuple[int | None, Any, asyncio.Future[Any]]]
    _last_action: float

    def _create_reader_task(self) -> Any:
        # connect() has made the reader and given it to the protocol, and has sent nothing yet
        reader = FrameReader.adopt(self._reader)
        transport = self._writer.transport
        if transport.get_extra_info("sslcontext") is None:
            transport.set_protocol(FrameProtocol(self._protocol, reader))
            reader.direct = _handler(self)
        return super()._create_reader_task()

    def send(self, request: Any, expect_response: bool = True) -> Any:
        """aiokafka's ``send``, but a request marked ``ENCODES_IN_PARTS`` (a client's request
        relayed: its body a view of the client's frame) is written as its size and header,
        then its prepared form's ``encode_parts``, in one ``writelines``: aiokafka joins header
        and body, then size and message, two copies of a Produce's megabyte of records. The
        sender of such a request times its answer."""
        if self._writer is None or not getattr(request, "ENCODES_IN_PARTS", False):
            return super().send(request, expect_response)
        prepared = request.prepare(self._versions)
        correlation_id = self._next_correlation_id()
        header = prepared.build_request_header(
            correlation_id=correlation_id, client_id=self._client_id
        ).encode()
        # no empty part: asyncio's transports from Python 3.12 keep an empty view left at the
        # end of a sendmsg as unsent data for ever, and a close then waits on it
        parts = [p for p in prepared.encode_parts() if len(p)]
        size = len(header) + sum(len(p) for p in parts)
        try:
            self._writer.writelines([_SIZE.pack(size) + header, *parts])
        except OSError as err:
            self.close(reason=CloseReason.CONNECTION_BROKEN)
            raise kafka_errors.KafkaConnectionError(
                f"Connection at {self._host}:{self._port} broken: {err}"
            ) from err
        if not expect_response:
            return self._writer.drain()
        fut = self._loop.create_future()
        self._requests.append((correlation_id, prepared, fut))
        # the answer itself: aiokafka would wrap it in a timer of the connection's timeout,
        # which for a relayed request is only a backstop, as its sender (UpstreamLink) gives
        # every request its own deadline
        return fut

    def _handle_frame(self, resp: bytes | memoryview) -> None:
        """A big frame arrives as a view of its own buffer, a small one as bytes. aiokafka
        would copy either into a BytesIO; a response type with ``decode_frame`` (a relayed
        answer, the proxy's own Fetch) reads a view of it instead. Any other answer, or one
        that does not match its request, goes aiokafka's way, as bytes."""
        correlation_id, request, fut = self._requests[0]
        decode = getattr(getattr(request, "RESPONSE_TYPE", None), "decode_frame", None)
        if correlation_id is None or decode is None:
            super()._handle_frame(bytes(resp))
            return
        if type(resp) is bytes:
            resp = memoryview(resp)
        header, at = request.read_response_header(resp)
        if header.correlation_id != correlation_id:
            super()._handle_frame(bytes(resp))
            return
        if not fut.done():
            fut.set_result(decode(resp, at))
        self._last_action = time.monotonic()
        self._requests.popleft()


def _handler(conn: FrameConnection) -> Callable[[bytes | memoryview], None]:
    """``conn._handle_frame``, held weakly as aiokafka's read loop holds its connection, so a
    connection nobody closed can still be collected."""
    ref = weakref.WeakMethod(conn._handle_frame)

    def handle(frame: bytes | memoryview) -> None:
        method = ref()
        if method is not None:
            method(frame)

    return handle


async def open_connection(host: str, port: int, **options: Any) -> AIOKafkaConnection:
    """``aiokafka.conn.create_conn``'s counterpart: a connected ``FrameConnection``."""
    conn = FrameConnection(host, port, **options)
    await conn.connect()
    return conn
