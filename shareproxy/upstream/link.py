"""Each client connection's own way to the upstream brokers, for the requests it forwards."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from aiokafka.conn import AIOKafkaConnection, CloseReason

from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.codec import RawResponse, Request
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.frames import open_connection
from shareproxy.upstream.kio_over_aiokafka import KioRequest, RawRequest

RELAY_TIMEOUT_MS = 15 * 60 * 1000
# the fields of a request saying how long a broker may hold it before answering (a JoinGroup's
# rebalance, v0 its session timeout; a Fetch's wait; the timeout of Produce, CreateTopics, ...)
_HELD_FOR = ("rebalance_timeout", "max_wait", "timeout", "timeout_ms")
_HELD_FOR_V0 = "session_timeout"


def answer_within_s(body: Any, request_timeout_ms: int) -> float:
    """How long an upstream may take to answer ``body``: as long as the request itself lets a
    broker hold it (at most RELAY_TIMEOUT_MS), plus the proxy's upstream request timeout. A
    broker still silent then is sick; the client is told so, retriably, instead of waiting."""
    held = [getattr(body, n) for n in _held_fields(body.__class__)]
    ms = max((_ms(v) for v in held), default=0)
    return (min(max(ms, 0), RELAY_TIMEOUT_MS) + request_timeout_ms) / 1000


@functools.cache
def _held_fields(cls: Any) -> tuple[str, ...]:
    """The fields of a request type that say how long a broker may hold it: asked for every
    relayed request, so read from the type once."""
    names = {f.name for f in dataclasses.fields(cls)}
    held = tuple(n for n in _HELD_FOR if n in names)
    if not held and _HELD_FOR_V0 in names and "protocols" in names:  # JoinGroup v0
        held = (_HELD_FOR_V0,)
    return held


def _ms(value: Any) -> int:
    return int(value / timedelta(milliseconds=1)) if isinstance(value, timedelta) else int(value)


class UpstreamLink:
    """One client connection's own connections to the upstream brokers, for the requests it
    forwards. A request the upstream answers by dropping the connection (a broker that chokes
    on a malformed produce, say) then fails only its sender's requests, never those of other
    clients or the proxy's own reads, and each client's requests reach a broker in the order
    the client sent them. A broker that stops answering fails a request with the retriable
    REQUEST_TIMED_OUT once ``answer_within_s`` has passed, and its connection is dropped."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self._conns: dict[int, AIOKafkaConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def send(self, node_id: int, body: Any) -> Any:
        """The node's answer; UpstreamError (NETWORK_EXCEPTION) if the connection fails."""
        return await self._send(node_id, KioRequest(body), body)

    async def relay(self, node_id: int, request: Request) -> RawResponse:
        """A client's request sent as it was encoded; the node's response body as it came."""
        return await (await self.start_relay(node_id, request))

    async def start_relay(self, node_id: int, request: Request) -> Awaitable[RawResponse]:
        """Send the request now and return its answer to await later: a client's requests
        reach the broker in the order they were started, and several may be on their way."""
        within = self._within(request.body)
        try:
            ready = self._conns.get(node_id)
            conn = (
                ready
                if ready is not None and ready.connected()
                else await asyncio.wait_for(self._conn(node_id), within)
            )
            waiting = conn.send(RawRequest(request))
        except UpstreamError:
            raise
        except TimeoutError as exc:
            raise self._timed_out(node_id, within) from exc
        except Exception as exc:
            raise self._failed(node_id, exc) from exc
        return self._answer(node_id, waiting, within)

    async def _answer(self, node_id: int, waiting: Awaitable[Any], within: float) -> RawResponse:
        try:
            async with asyncio.timeout(within):  # no task of its own, unlike wait_for
                return await waiting
        except TimeoutError as exc:
            raise self._timed_out(node_id, within) from exc
        except Exception as exc:
            raise self._failed(node_id, exc) from exc

    async def _send(self, node_id: int, request: KioRequest | RawRequest, body: Any) -> Any:
        within = self._within(body)
        try:
            async with asyncio.timeout(within):
                conn = await self._conn(node_id)
                return await conn.send(request)
        except UpstreamError:
            raise
        except TimeoutError as exc:
            raise self._timed_out(node_id, within) from exc
        except Exception as exc:
            raise self._failed(node_id, exc) from exc

    def _within(self, body: Any) -> float:
        return answer_within_s(body, self.upstream.settings.request_timeout_ms)

    def _timed_out(self, node_id: int, within: float) -> UpstreamError:
        self._drop(node_id)
        return UpstreamError(
            f"upstream node {node_id} did not answer within {within:g}s",
            ErrorCode.REQUEST_TIMED_OUT,
        )

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
            # a JoinGroup waits for the whole rebalance (up to the client's rebalance timeout):
            # each request's own deadline (``answer_within_s``) cuts it, not the connection's
            options["request_timeout_ms"] += RELAY_TIMEOUT_MS
            conn = await open_connection(broker.host, broker.port, **options)
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
