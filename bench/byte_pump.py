"""The least a relay can add: a byte pump on the proxy's own event loop (uvloop) that copies each
client connection's bytes to the broker and back, reading nothing, checking nothing.

``bench.relay_latency --floor`` puts one in front of a second broker, which advertises the
pump's address, so that what the pump adds is measured beside the proxy in the same run: the
part of the proxy's added latency that two more hops and four more socket calls cost on the
machine, whatever a relay does, and the part that is the proxy's own work.

    python -m bench.byte_pump LISTEN_PORT BROKER_PORT
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import cast

import uvloop

from shareproxy.demo.tansu import LOOPBACK


class _Side(asyncio.Protocol):
    """One socket of a pumped pair: what it reads is written to the other."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.early: list[bytes] = []  # read before the other socket was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.early.append(data)
        else:
            peer.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class _Client(_Side):
    """A client's socket: the broker's is opened when it connects."""

    def __init__(self, broker_port: int) -> None:
        super().__init__()
        self.broker_port = broker_port

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, broker = await loop.create_connection(_Side, LOOPBACK, self.broker_port)
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        broker.peer, self.peer = self, broker
        assert broker.transport is not None
        for data in self.early:
            broker.transport.write(data)
        self.early.clear()


async def pump(listen_port: int, broker_port: int) -> None:
    server = await asyncio.get_running_loop().create_server(
        lambda: _Client(broker_port), LOOPBACK, listen_port
    )
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("listen_port", type=int)
    parser.add_argument("broker_port", type=int)
    args = parser.parse_args()
    uvloop.run(pump(args.listen_port, args.broker_port))


if __name__ == "__main__":
    main()
