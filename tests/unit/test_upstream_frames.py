"""The upstream frame reader: frames come out whole and in order however the bytes were split,
a frame that is one chunk is handed over as it came, a big frame streams in without pausing
the socket, and a FrameConnection speaks to a broker as aiokafka's own does. The aiokafka and
asyncio internals it relies on are pinned: if they change, these tests fail."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import io
import random
import struct

import pytest
from aiokafka.conn import AIOKafkaConnection, create_conn
from aiokafka.protocol.admin import ApiVersionRequest, ApiVersionResponse_v0
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequest3

from shareproxy.protocol.codec import decode_request, encode_request
from shareproxy.upstream.frame_protocol import SCRATCH_BYTES, FrameProtocol
from shareproxy.upstream.frames import FrameConnection, FrameReader, open_connection
from shareproxy.upstream.kio_over_aiokafka import KioRequest, RawRequest

# aiokafka 0.14.0's sources that FrameConnection relies on (connect makes a plain reader and
# starts the read task before sending anything; the read loop calls only readexactly; connected
# calls at_eof; _handle_frame answers the left of _requests and pops it; send, which
# FrameConnection.send repeats for a relayed request). A new aiokafka must be read again.
PINNED = {
    "connect": "b0f9ba7f0cf6b432",
    "send": "5909ea32f4efca49",
    "_read": "7b892995c0b81468",
    "_handle_frame": "46a7d9b8cf7ca222",
    "connected": "e392e7f6dadb2368",
}


def _digest(fn: object) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_aiokafka_internals_relied_on_are_unchanged(name):
    assert _digest(getattr(AIOKafkaConnection, name)) == PINNED[name], (
        f"aiokafka's AIOKafkaConnection.{name} changed: check upstream/frames.py against it"
    )


def test_the_asyncio_internals_relied_on_are_there():
    async def main() -> None:
        reader = FrameReader()
        for name in ("_eof", "_exception", "_limit", "_paused", "_transport", "_waiter"):
            assert hasattr(reader, name), name
        for name in ("_wakeup_waiter", "_wait_for_data"):
            assert callable(getattr(asyncio.StreamReader, name)), name
        assert "feed_data" in inspect.getsource(asyncio.StreamReaderProtocol.data_received)

    asyncio.run(main())


class _Transport(asyncio.ReadTransport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = 0
        self.resumed = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.resumed += 1


def _frames(sizes: list[int]) -> tuple[list[bytes], bytes]:
    rnd = random.Random(sum(sizes))
    frames = [rnd.randbytes(n) for n in sizes]
    return frames, b"".join(struct.pack(">i", len(f)) + f for f in frames)


async def _read_frames(reader: FrameReader, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        out.append(await reader.readexactly(size))
    return out


@pytest.mark.parametrize("seed", range(20))
async def test_frames_come_out_whole_however_the_bytes_are_split(seed):
    rnd = random.Random(seed)
    frames, stream = _frames([rnd.choice([0, 1, 7, 300, 70_000, 400_000]) for _ in range(12)])
    reader = FrameReader()
    reader.set_transport(_Transport())
    task = asyncio.ensure_future(_read_frames(reader, len(frames)))
    at = 0
    while at < len(stream):
        step = rnd.choice([1, 3, 4, 5, 1000, 65_536, 262_144])
        reader.feed_data(stream[at : at + step])
        at += step
        if rnd.random() < 0.5:
            await asyncio.sleep(0)
    got = await task
    assert got == frames
    assert all(type(f) is bytes for f in got)
    reader.feed_eof()
    assert reader.at_eof()


async def test_a_frame_that_is_one_chunk_is_handed_over_as_it_came():
    reader = FrameReader()
    chunk = b"x" * 100_000
    reader.feed_data(b"\x00\x01\x86\xa0")
    reader.feed_data(chunk)
    assert await reader.readexactly(4) == b"\x00\x01\x86\xa0"
    assert await reader.readexactly(len(chunk)) is chunk


async def test_a_big_frame_streams_in_without_pausing_the_socket():
    reader = FrameReader(limit=1024)
    transport = _Transport()
    reader.set_transport(transport)
    waiting = asyncio.ensure_future(reader.readexactly(100_000))
    await asyncio.sleep(0)
    for _ in range(99):
        reader.feed_data(b"y" * 1000)
    await asyncio.sleep(0)
    assert not waiting.done()  # woken only when the whole frame is there
    reader.feed_data(b"y" * 1000 + b"z" * 500)  # and what comes after it is kept
    assert transport.paused == 0
    assert await waiting == b"y" * 100_000
    reader.feed_data(b"z" * 9000)  # nobody reading, and past twice the limit: pause
    assert transport.paused == 1
    assert await reader.readexactly(9_500) == b"z" * 9_500
    assert transport.resumed == 1
    assert not reader.at_eof()


async def test_a_short_stream_raises_incomplete_read_and_errors_propagate():
    reader = FrameReader()
    reader.feed_data(b"abc")
    reader.feed_eof()
    with pytest.raises(asyncio.IncompleteReadError) as err:
        await reader.readexactly(5)
    assert err.value.partial == b"abc"
    assert reader.at_eof()
    broken = FrameReader()
    waiting = asyncio.ensure_future(broken.readexactly(4))
    await asyncio.sleep(0)
    broken.set_exception(ConnectionResetError("gone"))
    with pytest.raises(ConnectionResetError):
        await waiting


async def _fake_broker(entries: int) -> tuple[asyncio.Server, int]:
    """Answers every request as an ApiVersions v0 request, with ``entries`` extra APIs listed so
    the answer is as big as a Fetch response."""
    versions = [(1000 + i % 30000, 0, 1) for i in range(entries)] + [(18, 0, 0)]
    body = ApiVersionResponse_v0(error_code=0, api_versions=versions).encode()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = await reader.readexactly(size)
                (correlation_id,) = struct.unpack(">i", request[4:8])
                frame = struct.pack(">i", correlation_id) + body
                writer.write(struct.pack(">i", len(frame)) + frame)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("entries", [0, 300_000])
async def test_a_frame_connection_speaks_to_a_broker_as_aiokafkas_does(entries):
    server, port = await _fake_broker(entries)
    async with server:
        ours = await open_connection("127.0.0.1", port, request_timeout_ms=5000)
        theirs = await create_conn("127.0.0.1", port, request_timeout_ms=5000)
        try:
            assert isinstance(ours, FrameConnection)
            assert isinstance(ours._reader, FrameReader)
            assert ours._versions == theirs._versions
            for _ in range(3):
                a, b = await asyncio.gather(
                    ours.send(ApiVersionRequest()), theirs.send(ApiVersionRequest())
                )
                assert a.api_versions == b.api_versions
                assert len(a.api_versions) == entries + 1
            assert ours.connected()
        finally:
            await ours.close()
            await theirs.close()
        assert not ours.connected()


@pytest.mark.parametrize(
    "body",
    [
        ApiVersionsRequest3(client_software_name="a-client", client_software_version="1.0"),
        ApiVersionsRequest(),  # v0 has no fields: an empty body
    ],
    ids=["body", "empty-body"],
)
async def test_a_relayed_request_reaches_the_broker_as_aiokafka_would_send_it(body):
    """A client's request relayed goes out as its size, header and the client's own body view
    (no copy), byte for byte what aiokafka's ``send`` would write, and is answered; an empty
    body is no part at all, and the connection still closes."""
    received: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = await reader.readexactly(4)
                request = await reader.readexactly(struct.unpack(">i", size)[0])
                received.append(size + request)
                frame = request[4:8] + ApiVersionResponse_v0(error_code=0, api_versions=[]).encode()
                writer.write(struct.pack(">i", len(frame)) + frame)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        conn = await open_connection("127.0.0.1", port, request_timeout_ms=5000)
        try:
            frame = encode_request(7, "a-client", body)[4:]
            request = decode_request(frame, {18: (0, 3)})
            written: list[list[object]] = []
            write = conn._writer.writelines

            def writelines(parts: list[object]) -> None:
                written.append(list(parts))
                write(parts)

            conn._writer.writelines = writelines  # type: ignore[method-assign]
            received.clear()
            answer = await asyncio.wait_for(conn.send(RawRequest(request)), 10)
            assert answer.api_key == 18
            if len(request.raw_body):
                assert written[0][-1] is request.raw_body  # the client's bytes, not a copy
            else:
                assert len(written[0]) == 1  # size and header alone
            prepared = RawRequest(request).prepare(conn._versions)
            correlation_id = conn._correlation_id  # the one this send took
            header = prepared.build_request_header(correlation_id, conn._client_id).encode()
            message = header + prepared.encode()
            assert received == [struct.pack(">i", len(message)) + message]
        finally:
            # an empty part left in the transport's buffer (Python 3.12+) would hold this
            await asyncio.wait_for(conn.close(), 10)


async def test_an_adopted_reader_keeps_what_it_had_buffered():
    reader = asyncio.StreamReader()
    reader.feed_data(b"abc")
    adopted = FrameReader.adopt(reader)
    assert adopted is reader and type(reader) is FrameReader
    reader.feed_data(b"def")
    assert await reader.readexactly(6) == b"abcdef"
    with pytest.raises(TypeError):
        FrameReader.adopt(reader)  # already one


class _Replaced(asyncio.Protocol):
    def __init__(self) -> None:
        self.told: list[str] = []

    def eof_received(self) -> bool:
        self.told.append("eof")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.told.append(f"lost {exc}")

    def pause_writing(self) -> None:
        self.told.append("pause")

    def resume_writing(self) -> None:
        self.told.append("resume")


@pytest.mark.parametrize("seed", range(20))
async def test_the_protocol_cuts_frames_however_the_reads_fall(seed):
    """Frames come out whole and in order; one bigger than the scratch buffer is received into
    a buffer of its own and handed on as a read-only view, a smaller one as bytes."""
    rnd = random.Random(seed)
    sizes = [
        rnd.choice([0, 1, 7, 300, SCRATCH_BYTES - 4, SCRATCH_BYTES - 3, 400_000]) for _ in range(12)
    ]
    frames, stream = _frames(sizes)
    reader = FrameReader()
    protocol = FrameProtocol(_Replaced(), reader)
    task = asyncio.ensure_future(_read_frames(reader, len(frames)))
    at = 0
    while at < len(stream):
        buffer = protocol.get_buffer(-1)
        assert len(buffer) > 0
        step = min(len(buffer), rnd.choice([1, 3, 4, 5, 1000, 65_536, 262_144]), len(stream) - at)
        buffer[:step] = stream[at : at + step]
        protocol.buffer_updated(step)
        at += step
        if rnd.random() < 0.5:
            await asyncio.sleep(0)
    got = await task
    assert [bytes(f) for f in got] == frames
    for frame in got:
        if len(frame) + 4 > SCRATCH_BYTES:
            assert isinstance(frame, memoryview) and frame.readonly
        else:
            assert type(frame) is bytes


async def test_the_protocol_passes_on_what_is_not_data():
    replaced = _Replaced()
    reader = FrameReader()
    protocol = FrameProtocol(replaced, reader)
    protocol.pause_writing()
    protocol.resume_writing()
    assert protocol.eof_received() is False
    protocol.connection_lost(None)
    assert replaced.told == ["pause", "resume", "eof", "lost None"]


async def test_a_negative_size_fails_the_read_as_before():
    reader = FrameReader()
    protocol = FrameProtocol(_Replaced(), reader)
    buffer = protocol.get_buffer(-1)
    buffer[:8] = struct.pack(">i", -5) + b"junk"
    protocol.buffer_updated(8)
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    with pytest.raises(ValueError):
        await reader.readexactly(size)


class _ViewsKept:
    """A response type that reads a big frame's view itself, as the Fetch reader does."""

    cls = ApiVersionsResponse

    def decode(self, data: io.BytesIO) -> tuple[str, int]:
        return "decode", len(data.getvalue()) - data.tell()

    def decode_frame(self, frame: memoryview, at: int) -> tuple[str, int, memoryview]:
        return "decode_frame", len(frame) - at, frame


@pytest.mark.parametrize("entries", [0, 300_000])
async def test_an_answer_reaches_its_reader_as_a_view_not_a_copy(entries):
    """A big answer as the view of the buffer it was received into, a small one as a view of
    the bytes it was cut into: aiokafka's way would copy either into a BytesIO first."""
    server, port = await _fake_broker(entries)
    async with server:
        conn = await open_connection("127.0.0.1", port, request_timeout_ms=5000)
        try:
            assert isinstance(conn._writer.transport.get_protocol(), FrameProtocol)
            for _ in range(3):
                answer = await conn.send(KioRequest(ApiVersionsRequest(), decoder=_ViewsKept()))
                how, size, frame = answer
                assert how == "decode_frame" and frame.readonly
                assert (size > SCRATCH_BYTES) == bool(entries)
        finally:
            await conn.close()


async def test_a_whole_frame_with_nothing_before_it_is_handled_at_once_and_order_is_kept():
    handled: list[bytes | memoryview] = []
    reader = FrameReader()
    reader.direct = handled.append
    reader.feed_frame(b"\x00\x00\x00\x01", b"a")  # nothing held: handled here and now
    assert handled == [b"a"] and not reader._held
    reader.feed_data(b"\x00\x00")  # half a size prefix waits in the reader
    reader.feed_frame(b"\x00\x00\x00\x01", b"b")  # so this one queues behind it, in order
    assert handled == [b"a"]
    assert await reader.readexactly(6) == b"\x00\x00\x00\x00\x00\x01"
    assert await reader.readexactly(1) == b"b"


async def test_a_frame_handled_at_once_that_fails_fails_the_read_loop():
    reader = FrameReader()

    def broken(frame: bytes | memoryview) -> None:
        raise IndexError("an answer to no request")

    reader.direct = broken
    reader.feed_frame(b"\x00\x00\x00\x01", b"a")
    with pytest.raises(IndexError):
        await reader.readexactly(4)
