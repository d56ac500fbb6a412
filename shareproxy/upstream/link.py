"""Each client connection's own way to the upstream brokers, for the requests it forwards."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from aiokafka.conn import AIOKafkaConnection, CloseReason, create_conn

from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.codec import RawResponse, Request
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.kio_over_aiokafka import KioRequest, RawRequest

RELAY_TIMEOUT_MS = 15 * 60 * 1000


class UpstreamLink:
    """One client connection's own connections to the upstream brokers, for the requests it
    forwards. A request the upstream answers by dropping the connection (a broker that chokes
    on a malformed produce, say) then fails only its sender's requests, never those of other
    clients or the proxy's own reads, and each client's requests reach a broker in the order
    the client sent them."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self._conns: dict[int, AIOKafkaConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def send(self, node_id: int, body: Any) -> Any:
        """The node's answer; UpstreamError (NETWORK_EXCEPTION) if the connection fails."""
        return await self._send(node_id, KioRequest(body))

    async def relay(self, node_id: int, request: Request) -> RawResponse:
        """A client's request sent as it was encoded; the node's response body as it came."""
        return await (await self.start_relay(node_id, request))

    async def start_relay(self, node_id: int, request: Request) -> Awaitable[RawResponse]:
        """Send the request now and return its answer to await later: a client's requests
        reach the broker in the order they were started, and several may be on their way."""
        try:
            conn = await self._conn(node_id)
            waiting = conn.send(RawRequest(request))
        except UpstreamError:
            raise
        except Exception as exc:
            raise self._failed(node_id, exc) from exc
        return self._answer(node_id, waiting)

    async def _answer(self, node_id: int, waiting: Awaitable[Any]) -> RawResponse:
        try:
            return await waiting  # type: ignore[no-any-return]
        except Exception as exc:
            raise self._failed(node_id, exc) from exc

    async def _send(self, node_id: int, request: KioRequest | RawRequest) -> Any:
        try:
            conn = await self._conn(node_id)
            return await conn.send(request)
        except UpstreamError:
            raise
        except Exception as exc:
            raise self._failed(node_id, exc) from exc

    def _failed(self, node_id: int, exc: Exception) -> UpstreamError:
        self._drop(node_id)
        return UpstreamError(
            f"forwarding to upstream node {node_id} failed: {exc!r}", ErrorCode.NETWORK_EXCEPTION
        )

    async def _conn(self, node_id: int) -> AIOKafkaConnection:
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected():
            return conn
        async with self._connecting.setdefault(node_id, asyncio.Lock()):
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected():
                return conn
            broker = self.upstream.client.cluster.broker_metadata(node_id)
            if broker is None:
                raise UpstreamError(
                    f"upstream node {node_id} is not known", ErrorCode.NETWORK_EXCEPTION
                )
            options = self.upstream.connection_options()
            # a JoinGroup waits for the whole rebalance (up to the client's rebalance timeout)
            # and the client times out its own requests: the link does not cut them shorter
            options["request_timeout_ms"] = max(options["request_timeout_ms"], RELAY_TIMEOUT_MS)
            conn = await create_conn(broker.host, broker.port, **options)
            self._conns[node_id] = conn
            return conn

    def _drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close(reason=CloseReason.CONNECTION_BROKEN)

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close(reason=CloseReason.SHUTDOWN)
