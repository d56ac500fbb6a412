"""The listener's pipelining, with the request handling replaced by a stand-in (what the
answers are does not matter here, only when and in which order they are written): Produce
answers still on their way upstream let the next requests in, answers leave in request order
(those ready at once among them), a connection that breaks while answering never leaves its
task hanging nor an upstream answer unawaited, and shutting down waits for no connection that
owes nothing."""

from __future__ import annotations

import asyncio
import gc
import logging
import struct
import time
import warnings

import pytest

from shareproxy.kafka.answer_order import Slot
from shareproxy.kafka.context import Pending, Relayed
from shareproxy.kafka.listener import MAX_PIPELINED, KafkaListener
from shareproxy.protocol.codec import RawResponse, Request
from tests.support.listener_context import listener_only

PRODUCE, METADATA = 0, 3


def frame(api_key: int, correlation_id: int) -> bytes:
    body = struct.pack(">hhi", api_key, 9, correlation_id) + b"\xff\xff"
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def handled(monkeypatch) -> list[int]:
    """Every request's correlation id, as handling starts; a Produce's answer takes longer the
    earlier it was sent, so a listener that wrote answers as they come would reorder them."""
    seen: list[int] = []

    async def answer(self, conn, data):
        api_key, _, cid = struct.unpack_from(">hhi", data)
        seen.append(cid)
        if api_key == PRODUCE:

            async def later():
                await asyncio.sleep(0.3 - 0.05 * (cid % 5))
                return [struct.pack(">ii", 4, cid)]

            return Slot.of(asyncio.create_task(later()))
        return [struct.pack(">ii", 4, cid)]

    monkeypatch.setattr(KafkaListener, "_answer", answer)
    return seen


async def answers(reader: asyncio.StreamReader, n: int) -> list[int]:
    return [
        struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 5))[1] for _ in range(n)
    ]


async def test_produces_overlap_and_answers_keep_request_order(handled):
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(b"".join(frame(PRODUCE, cid) for cid in range(1, 5)) + frame(METADATA, 5))
    started = time.monotonic()
    assert await answers(reader, 5) == [1, 2, 3, 4, 5]
    assert time.monotonic() - started < 0.9  # four 0.1-0.3 s answers overlapped
    assert handled == [1, 2, 3, 4, 5]
    writer.close()
    await listener.stop(grace_s=3)


async def test_answers_ready_at_once_keep_their_place_among_pipelined_ones(handled):
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(frame(METADATA, 1))
    assert await answers(reader, 1) == [1]  # nothing owed before it: written at once
    writer.write(frame(PRODUCE, 2) + frame(PRODUCE, 3) + frame(METADATA, 4) + frame(METADATA, 5))
    assert await answers(reader, 4) == [2, 3, 4, 5]
    writer.close()
    await listener.stop(grace_s=3)


@pytest.mark.parametrize("requests", [[PRODUCE, PRODUCE, METADATA], [METADATA, METADATA]])
async def test_a_connection_that_breaks_while_answering_ends_its_task(
    handled, monkeypatch, caplog, requests
):
    caplog.set_level(logging.INFO, "shareproxy.kafka.listener")
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    _reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    real_drain = asyncio.StreamWriter.drain

    async def drain(self):
        if self is not writer:  # the proxy's side: a peer that stopped reading
            raise TimeoutError("timed out")
        return await real_drain(self)

    monkeypatch.setattr(asyncio.StreamWriter, "drain", drain)
    writer.write(b"".join(frame(api_key, cid) for cid, api_key in enumerate(requests, 1)))
    await writer.drain()
    await asyncio.sleep(0.5)
    writer.close()
    tasks = list(listener._connections)
    deadline = time.monotonic() + 3
    while any(not t.done() for t in tasks) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert all(t.done() for t in tasks), "the connection's task hangs"
    assert "broke while answering" in caplog.text
    assert not [r for r in caplog.records if r.exc_info], "a traceback for a broken connection"
    monkeypatch.setattr(asyncio.StreamWriter, "drain", real_drain)
    await listener.stop(grace_s=3)


@pytest.mark.parametrize("api_key", [PRODUCE, METADATA])
async def test_shutdown_does_not_wait_for_a_connection_that_owes_nothing(handled, api_key):
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(frame(api_key, 1))
    assert await answers(reader, 1) == [1]
    started = time.monotonic()
    await listener.stop(grace_s=3)
    assert time.monotonic() - started < 1.5
    writer.close()


async def test_shutdown_answers_what_is_owed_before_closing(handled):
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(frame(PRODUCE, 1) + frame(PRODUCE, 2))
    await writer.drain()
    await asyncio.sleep(0.05)  # both sent upstream, neither answered
    stopping = asyncio.create_task(listener.stop(grace_s=3))
    assert await answers(reader, 2) == [1, 2]
    await stopping
    writer.close()


@pytest.fixture
def upstream(monkeypatch) -> list[asyncio.Future[list[bytes]]]:
    """Every Produce's upstream answer, never given: each is awaited, as a relayed answer is,
    by a coroutine handed to the answer's task (the listener's own ``_finish`` takes one)."""
    owed: list[asyncio.Future[list[bytes]]] = []

    async def relayed(answer):
        return await answer

    async def finish(answer):
        return await answer

    async def answer(self, conn, data):
        api_key, _, cid = struct.unpack_from(">hhi", data)
        if api_key != PRODUCE:
            return [struct.pack(">ii", 4, cid)]
        owed.append(asyncio.get_running_loop().create_future())
        return Slot.of(asyncio.create_task(finish(relayed(owed[-1]))))

    monkeypatch.setattr(KafkaListener, "_answer", answer)
    return owed


async def _done(tasks, within: float = 3) -> None:
    deadline = time.monotonic() + within
    while any(not t.done() for t in tasks) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def test_answers_cancelled_as_their_connection_breaks_leave_nothing_unawaited(
    upstream, monkeypatch
):
    """The answer is cancelled in the very round its task was made: had the task not started
    first, the coroutines it was given would never run, their upstream answer would be left
    unawaited, and closing the upstream link would fail it with no one to read the failure."""
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    _reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    real_drain = asyncio.StreamWriter.drain

    async def drain(self):
        if self is not writer:  # the proxy's side: the client is gone
            raise ConnectionResetError("reset")
        return await real_drain(self)

    monkeypatch.setattr(asyncio.StreamWriter, "drain", drain)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer.write(frame(PRODUCE, 1))
        await writer.drain()
        deadline = time.monotonic() + 3
        while not upstream and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        tasks = list(listener._connections)
        await _done(tasks)
        gc.collect()
    assert len(upstream) == 1
    assert all(t.done() for t in tasks), "the connection's task hangs"
    assert upstream[0].cancelled(), "the upstream answer was left to fail unread"
    assert not [w for w in caught if "never awaited" in str(w.message)]
    monkeypatch.setattr(asyncio.StreamWriter, "drain", real_drain)
    writer.close()
    await listener.stop(grace_s=3)


@pytest.mark.parametrize("answers", ["upstream", "relayed"])
async def test_an_answer_waiting_for_room_is_cancelled_when_its_connection_ends(request, answers):
    """A client pipelines more Produce requests than a connection may owe answers for; the last
    waits for room, and at shutdown it is cancelled with those owed, not left to fail: answers
    made by tasks, and those relayed whole (their upstream futures, at once)."""
    owed = request.getfixturevalue(answers)
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    _reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(b"".join(frame(PRODUCE, cid) for cid in range(1, MAX_PIPELINED + 2)))
    await writer.drain()
    deadline = time.monotonic() + 3
    while len(owed) <= MAX_PIPELINED and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert len(owed) == MAX_PIPELINED + 1
    await listener.stop(grace_s=0.1)
    assert all(getattr(answer, "future", answer).cancelled() for answer in owed)
    writer.close()


class _InFlight:
    """An upstream answer on its way, as ``UpstreamLink.start_relay`` returns it."""

    def __init__(self) -> None:
        self.future: asyncio.Future[RawResponse] = asyncio.get_running_loop().create_future()

    def outcome(self) -> RawResponse:
        return self.future.result()

    def cancel(self) -> None:
        self.future.cancel()


@pytest.fixture
def relayed(monkeypatch) -> list[_InFlight]:
    """Every Produce relayed whole, its answer given by the test (``future.set_result``):
    the listener's own ``_relayed`` writes it; ``finish`` asks for more first where the
    broker's answer says ``"look again"``, as a Produce to a deleted topic does."""
    owed: list[_InFlight] = []

    async def looked_again():
        await asyncio.sleep(0.05)
        return RawResponse(PRODUCE, 9, b"looked")

    def finish(outcome):
        return Pending(looked_again()) if outcome.body == b"look again" else outcome

    async def answer(self, conn, data):
        api_key, _, cid = struct.unpack_from(">hhi", data)
        if api_key != PRODUCE:
            return [struct.pack(">ii", 4, cid)]
        owed.append(_InFlight())
        request = Request(PRODUCE, 9, cid, "c", None)
        return self._relayed(conn, request, time.perf_counter(), Relayed(owed[-1], finish))

    monkeypatch.setattr(KafkaListener, "_answer", answer)
    return owed


async def framed(reader: asyncio.StreamReader, n: int) -> list[tuple[int, bytes]]:
    """(correlation id, body) of each of the next ``n`` answers: flexible ones (a tag byte
    after the correlation id) for Produce, plain ones for the rest."""
    out = []
    for _ in range(n):
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
        frame = await asyncio.wait_for(reader.readexactly(size), 5)
        (cid,) = struct.unpack_from(">i", frame)
        out.append((cid, frame[5:] if size > 4 else b""))
    return out


async def test_relayed_answers_are_written_as_they_arrive_in_request_order(relayed):
    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    await listener.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(frame(PRODUCE, 1) + frame(PRODUCE, 2) + frame(PRODUCE, 3) + frame(METADATA, 4))
    await writer.drain()
    deadline = time.monotonic() + 3
    while len(relayed) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    relayed[2].future.set_result(RawResponse(PRODUCE, 9, b"third"))
    relayed[1].future.set_result(RawResponse(PRODUCE, 9, b"look again"))
    await asyncio.sleep(0.1)
    assert not reader._buffer, "an answer overtook the first"  # type: ignore[attr-defined]
    relayed[0].future.set_result(RawResponse(PRODUCE, 9, b"first"))
    assert await framed(reader, 4) == [(1, b"first"), (2, b"looked"), (3, b"third"), (4, b"")]
    writer.close()
    await listener.stop(grace_s=3)
