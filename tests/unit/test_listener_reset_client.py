"""A client that resets its connection while its answer is written: the listener notes it in
one line and goes on. uvloop cannot name the peer of a reset socket (it raised ValueError, a
negative file descriptor), and that once turned the note into a logged traceback."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
import uvloop

from shareproxy.kafka.listener import KafkaListener
from tests.support.listener_context import listener_only


def test_an_answer_to_a_client_that_reset_is_dropped_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> list[bool]:
        listener = KafkaListener(listener_only(), "127.0.0.1", 0)
        sent: list[bool] = []
        done = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1)
            await asyncio.sleep(0.2)  # the client resets meanwhile
            for _ in range(2):  # the second finds the transport closed as well
                sent.append(await listener._send(writer, [b"x" * 8_000_000]))
            done.set()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        client.send(b"a")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset, not an orderly close
        await asyncio.wait_for(done.wait(), 10)
        server.close()
        await server.wait_closed()
        return sent

    with caplog.at_level("INFO", logger="shareproxy.kafka.listener"):
        assert uvloop.run(main()) == [False, False]
    assert "broke while answering" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
