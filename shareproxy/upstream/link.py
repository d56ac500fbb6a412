"""Each client connection's own way to the upstream brokers, for the requests it forwards."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Generator
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

    async def start_relay(self, node_id: int, request: Request) -> InFlight:
        """Send the request now and return its answer on its way: a client's requests reach
        the broker in the order they were started, and several may be on their way."""
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
        return InFlight(self, node_id, within, waiting)

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
        return _timeout(node_id, within)

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


class InFlight:
    """A relayed request's answer on its way: ``future`` is done when the broker answers, the
    connection fails, or ``answer_within_s`` passes (its timer then fails it with the retriable
    REQUEST_TIMED_OUT and drops the connection), and ``outcome`` reads it then. A caller may
    await it, or, as the listener does, read it in a callback of ``future``: an answer written
    in the round it arrives, with no task of its own."""

    __slots__ = ("_link", "_node_id", "_timer", "future")

    def __init__(
        self, link: UpstreamLink, node_id: int, within: float, future: asyncio.Future[Any]
    ) -> None:
        self._link = link
        self._node_id = node_id
        self.future = future
        self._timer = future.get_loop().call_later(within, self._expired, within)

    def outcome(self) -> RawResponse:
        """The broker's answer; UpstreamError where there is none. Only once ``future`` is
        done; CancelledError where it was cancelled."""
        self._timer.cancel()
        exc = self.future.exception()
        if exc is None:
            answer: RawResponse = self.future.result()
            return answer
        if isinstance(exc, UpstreamError | asyncio.CancelledError) or not isinstance(
            exc, Exception
        ):
            raise exc
        raise self._link._failed(self._node_id, exc) from exc

    def cancel(self) -> None:
        """Nobody waits for the answer any more (its client left)."""
        self._timer.cancel()
        self.future.cancel()

    def __await__(self) -> Generator[Any, None, RawResponse]:
        try:
            yield from self.future.__await__()
        except asyncio.CancelledError:
            self._timer.cancel()
            raise
        except Exception:
            pass  # read by outcome
        return self.outcome()

    def _expired(self, within: float) -> None:
        if not self.future.done():
            # failed first: dropping the connection fails what it still owes with its own error
            self.future.set_exception(_timeout(self._node_id, within))
            self._link._drop(self._node_id)


def _timeout(node_id: int, within: float) -> UpstreamError:
    return UpstreamError(
        f"upstream node {node_id} did not answer within {within:g}s", ErrorCode.REQUEST_TIMED_OUT
    )
