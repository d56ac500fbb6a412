"""Accepting connections while the event loop is busy: a fleet of clients that start together
all get in within a few turns of the loop, each turn carrying other clients' requests. On uvloop,
the proxy's loop, whose own server takes one connection per turn, 300 connections took 300 turns
and the kernel dropped the SYNs of those its queue could not hold."""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import time
from collections.abc import Callable

import pytest
import uvloop

from shareproxy.kafka.listener import KafkaListener
from tests.support.listener_context import listener_only

CLIENTS = 300
TURN_S = 0.02  # what other clients' requests take of each turn


@pytest.mark.parametrize(
    "loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop], ids=["uvloop", "asyncio"]
)
def test_every_waiting_connection_is_taken_within_a_few_busy_turns(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def main() -> int:
        listener = KafkaListener(listener_only(), "127.0.0.1", 0)
        await listener.start()
        loop = asyncio.get_running_loop()
        turns = 0
        busy = True

        def turn() -> None:
            nonlocal turns
            turns += 1
            time.sleep(TURN_S)
            if busy:
                loop.call_soon(turn)

        clients = []
        for _ in range(CLIENTS):  # the kernel completes each handshake while the loop is busy
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", listener.port))
            clients.append(c)
        loop.call_soon(turn)
        while len(listener._connections) < CLIENTS and turns < 2 * CLIENTS:
            await asyncio.sleep(0)
        taken, busy = turns, False
        assert len(listener._connections) == CLIENTS
        for c in clients:
            c.close()
        await listener.stop(grace_s=3)
        return taken

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        taken = runner.run(main())
    assert taken <= 10, f"{CLIENTS} connections took {taken} turns of the loop"


def test_out_of_file_descriptors_pauses_accepting_with_a_warning_then_takes_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    async def main() -> tuple[int, int]:
        listener = KafkaListener(listener_only(), "127.0.0.1", 0)
        await listener.start()
        clients = [socket.socket() for _ in range(8)]
        highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
        hogs = []
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
            while True:  # every descriptor number left below the limit taken
                try:
                    hogs.append(socket.socket())
                except OSError:
                    break
            for c in clients:  # the kernel queues them; the proxy cannot take them
                c.connect(("127.0.0.1", listener.port))
            await asyncio.sleep(0.3)
            while_out = len(listener._connections)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            for h in hogs:
                h.close()
        for _ in range(40):
            if len(listener._connections) == len(clients):
                break
            await asyncio.sleep(0.1)
        after = len(listener._connections)
        for c in clients:
            c.close()
        await listener.stop(grace_s=3)
        return while_out, after

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        while_out, after = runner.run(main())
    assert while_out == 0
    assert after == 8
    assert "cannot accept connections for 1 s" in caplog.text
