"""A relayed request to an upstream broker that accepts connections and then never answers is
answered, within its own wait plus the upstream request timeout, with the retriable
REQUEST_TIMED_OUT: it neither hangs its client nor keeps the dead connection."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from kio.schema.heartbeat.v4 import request as hb_req
from kio.schema.join_group.v9 import request as join_req

from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import Request
from shareproxy.upstream.client import UpstreamError
from shareproxy.upstream.link import RELAY_TIMEOUT_MS, UpstreamLink, answer_within_s

TIMEOUT_MS = 300


async def _silent_broker() -> tuple[asyncio.Server, int]:
    """Reads whatever comes and never answers: a wedged broker."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _upstream(port: int) -> SimpleNamespace:
    broker = SimpleNamespace(host="127.0.0.1", port=port)
    return SimpleNamespace(
        settings=SimpleNamespace(request_timeout_ms=TIMEOUT_MS),
        client=SimpleNamespace(cluster=SimpleNamespace(broker_metadata=lambda node: broker)),
        connection_options=lambda: {
            "client_id": "test",
            "security_protocol": "PLAINTEXT",
            "request_timeout_ms": TIMEOUT_MS,
        },
    )


def _heartbeat() -> hb_req.HeartbeatRequest:
    return hb_req.HeartbeatRequest(
        group_id="g", generation_id=1, member_id="m", group_instance_id=None
    )


@pytest.mark.parametrize("how", ["relayed", "read as it arrives", "sent"])
async def test_a_silent_upstream_times_out_retriably_instead_of_hanging(how):
    server, port = await _silent_broker()
    link = UpstreamLink(_upstream(port))  # type: ignore[arg-type]
    body = _heartbeat()
    started = time.monotonic()
    try:
        with pytest.raises(UpstreamError) as failed:
            request = Request(ApiKey.HEARTBEAT, 4, 7, "c", body, raw_body=b"")
            if how == "relayed":
                await asyncio.wait_for(link.relay(1, request), 20)
            elif how == "read as it arrives":  # as the listener reads it: in a callback
                answer = await link.start_relay(1, request)
                await asyncio.wait_for(asyncio.wait([answer.future]), 20)
                assert 1 not in link._conns, "the silent connection is kept"
                answer.outcome()
            else:
                await asyncio.wait_for(link.send(1, body), 20)
    finally:
        await link.close()
        server.close()
    assert failed.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert time.monotonic() - started < 5


def test_a_request_may_be_held_as_long_as_it_says_and_no_longer_than_the_cap():
    assert answer_within_s(_heartbeat(), TIMEOUT_MS) == TIMEOUT_MS / 1000
    join = join_req.JoinGroupRequest(
        group_id="g",
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=60),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(),
        reason=None,
    )
    assert answer_within_s(join, TIMEOUT_MS) == 60 + TIMEOUT_MS / 1000
    forever = dataclasses.replace(join, rebalance_timeout=timedelta(days=24))
    assert answer_within_s(forever, TIMEOUT_MS) == (RELAY_TIMEOUT_MS + TIMEOUT_MS) / 1000
    negative = dataclasses.replace(join, rebalance_timeout=timedelta(seconds=-5))
    assert answer_within_s(negative, TIMEOUT_MS) == TIMEOUT_MS / 1000
