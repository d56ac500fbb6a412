"""The proxy's own connections to the upstream brokers, for its reads (Fetch, Metadata,
ListOffsets, the coordinators' lookups).

They are ``FrameConnection``s (``upstream/frames.py``), which read a megabyte Fetch response
with one copy where aiokafka's own take two. aiokafka's client makes its connections with a
module-level ``create_conn`` that no argument replaces, so the proxy keeps these beside it and
uses the client for what it is good at: bootstrap and the cluster's metadata (where each node
is). Everything else follows ``AIOKafkaClient``: a connection per node and lane, made again once
broken, closed when it times out or idles, and a broken one asks for fresh metadata.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.conn import AIOKafkaConnection, CloseReason

from shareproxy.upstream.frames import open_connection

IDLE_MS = 540_000  # aiokafka's connections_max_idle_ms
_STALE = (CloseReason.CONNECTION_BROKEN, CloseReason.CONNECTION_TIMEOUT)


class NodeUnknown(Exception):
    """The cluster metadata names no such node."""


class Connections:
    """One connection per (node, lane): a lane per kind of request that must not wait behind
    another (a held long-poll Fetch would hold up every request behind it on its connection)."""

    def __init__(self, client: AIOKafkaClient, options: dict[str, Any]) -> None:
        self._client = client
        self._options = options
        self._conns: dict[tuple[int, int], AIOKafkaConnection] = {}
        self._connecting: dict[tuple[int, int], asyncio.Lock] = {}

    async def send(self, node_id: int, request: Any, lane: int = 0) -> Any:
        conn = await self._conn(node_id, lane)
        try:
            return await conn.send(request)
        except TimeoutError:
            conn.close(reason=CloseReason.CONNECTION_TIMEOUT)  # renewed by the next request
            raise

    async def _conn(self, node_id: int, lane: int) -> AIOKafkaConnection:
        key = (node_id, lane)
        conn = self._conns.get(key)
        if conn is not None and conn.connected():
            return conn
        async with self._connecting.setdefault(key, asyncio.Lock()):
            conn = self._conns.get(key)
            if conn is not None and conn.connected():
                return conn
            broker = self._client.cluster.broker_metadata(node_id)
            if broker is None:
                raise NodeUnknown(f"broker id {node_id} is not in the cluster metadata")
            try:
                conn = await open_connection(
                    broker.host,
                    broker.port,
                    max_idle_ms=IDLE_MS,
                    on_close=self._closed,
                    **self._options,
                )
            except Exception:
                self._client.force_metadata_update()  # a node out of reach: has it moved?
                raise
            self._conns[key] = conn
            return conn

    def _closed(self, conn: AIOKafkaConnection, reason: CloseReason | None) -> None:
        if reason in _STALE:
            self._client.force_metadata_update()

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        await asyncio.gather(*(c.close(reason=CloseReason.SHUTDOWN) for c in conns))
