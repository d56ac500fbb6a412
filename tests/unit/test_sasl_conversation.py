"""What a client hears, request by request, while it authenticates: a real listener, the real
SASL and ApiVersions handlers, every other API answered by a stand-in. Requests out of order
are answered as Kafka answers them (ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM,
SASL_AUTHENTICATION_FAILED) and end the connection after that answer; any other API before
authentication ends it unanswered."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

import shareproxy.kafka.listener as listener_module
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.dispatch import BEFORE_AUTHENTICATION, SERVED, handler_for
from shareproxy.kafka.listener import KafkaListener
from shareproxy.protocol.codec import Request, decode_response, encode_request, response_type
from shareproxy.protocol.error_response import error_entity
from shareproxy.security.credentials import ScramCredential
from shareproxy.security.scram import make_credentials
from shareproxy.telemetry import metrics
from tests.support.listener_context import ListenerOnly

ILLEGAL = ErrorCode.ILLEGAL_SASL_STATE
PASSWORD = "right-Pass-1"
GOOD = b"\x00alice\x00" + PASSWORD.encode()
BAD = b"\x00alice\x00wrong-Pass-2"
HANDSHAKE = SaslHandshakeRequest(mechanism="PLAIN")
AUTHENTICATE = SaslAuthenticateRequest(auth_bytes=GOOD)


class _Context(ListenerOnly):
    """What the listener and the SASL and ApiVersions handlers read."""

    served = SERVED
    sasl_mechanisms = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

    def __init__(self) -> None:
        stored = make_credentials("alice", PASSWORD)
        self._stored = {(c.username, c.mechanism): c for c in stored}

    def credential(self, username: str, mechanism: str) -> ScramCredential | None:
        return self._stored.get((username, mechanism))


async def _served(ctx: Any, conn: Any, request: Request) -> Any:
    """Any API past authentication: an empty answer says it was read and handled."""
    return error_entity(response_type(request.api_key, request.api_version), 0, None)


@pytest.fixture(autouse=True)
def _stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        listener_module,
        "handler_for",
        lambda key: handler_for(key) if key in BEFORE_AUTHENTICATION else _served,
    )


class _Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation = reader, writer, 0

    async def call(self, body: Any) -> Any:
        self.correlation += 1
        self.writer.write(encode_request(self.correlation, "t", body))
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 5))[0]
        frame = await asyncio.wait_for(self.reader.readexactly(size), 5)
        cid, answer = decode_response(
            frame, load_response_schema(body.__api_key__, body.__version__)
        )
        assert cid == self.correlation
        return answer

    async def closed(self) -> bool:
        """True when the listener closed the connection with nothing more to say."""
        return await asyncio.wait_for(self.reader.read(1), 5) == b""


@pytest.fixture(params=["SASL_PLAINTEXT"])
async def listener(request: pytest.FixtureRequest) -> AsyncIterator[KafkaListener]:
    ctx: Any = _Context()
    served = KafkaListener(ctx, "127.0.0.1", 0, protocol=request.param)
    await served.start()
    yield served
    await served.stop(grace_s=1)


async def _connect(listener: KafkaListener) -> _Client:
    return _Client(*await asyncio.open_connection("127.0.0.1", listener.port))


def _counted(listener: str, principal: str) -> float:
    labels = {"listener": listener, "principal": principal}
    return metrics.REGISTRY.get_sample_value("shareproxy_connections_total", labels) or 0.0


def _metadata() -> Any:
    return load_request_schema(3, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


async def test_plain_authenticates_names_the_principal_and_opens_every_api(listener):
    before = _counted("SASL_PLAINTEXT", "User:alice")
    c = await _connect(listener)
    versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    assert (await c.call(versions)).error_code == 0
    shake = await c.call(HANDSHAKE)
    assert (shake.error_code, shake.mechanisms) == (0, _Context.sasl_mechanisms)
    assert (await c.call(AUTHENTICATE)).error_code == 0
    assert listener.open_connections() == {("SASL_PLAINTEXT", "User:alice"): 1}
    assert _counted("SASL_PLAINTEXT", "User:alice") == before + 1
    assert await c.call(_metadata()) is not None  # read and answered


async def test_scram_takes_two_rounds_and_nothing_else_is_read_between_them(listener):
    c = await _connect(listener)
    scram = ScramClient(["SCRAM-SHA-256"], "alice", PASSWORD)
    assert (await c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))).error_code == 0
    first = await c.call(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
    assert first.error_code == 0
    scram.set_server_first(first.auth_bytes.decode())
    final = await c.call(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
    assert final.error_code == 0
    scram.set_server_final(final.auth_bytes.decode())
    assert await c.call(_metadata()) is not None  # read and answered


async def test_another_api_mid_exchange_ends_the_connection_unanswered(listener):
    c = await _connect(listener)
    scram = ScramClient(["SCRAM-SHA-256"], "alice", PASSWORD)
    assert (await c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))).error_code == 0
    await c.call(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
    c.writer.write(encode_request(9, "t", _metadata()))
    assert await c.closed()


async def test_another_api_before_the_handshake_ends_the_connection_unanswered(listener):
    c = await _connect(listener)
    c.writer.write(encode_request(1, "t", _metadata()))
    assert await c.closed()
    assert listener.open_connections() == {}


@pytest.mark.parametrize(
    ("requests", "last_code"),
    [
        ([AUTHENTICATE], ILLEGAL),
        ([SaslHandshakeRequest(mechanism="GSSAPI")], ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ([HANDSHAKE, HANDSHAKE], ILLEGAL),
        (
            [HANDSHAKE, SaslAuthenticateRequest(auth_bytes=BAD)],
            ErrorCode.SASL_AUTHENTICATION_FAILED,
        ),
        ([HANDSHAKE, AUTHENTICATE, HANDSHAKE], ILLEGAL),
        ([HANDSHAKE, AUTHENTICATE, AUTHENTICATE], ILLEGAL),
    ],
    ids=[
        "authenticate-first",
        "unknown-mechanism",
        "handshake-twice",
        "wrong-password",
        "handshake-once-authenticated",
        "authenticate-once-authenticated",
    ],
)
async def test_a_refused_sasl_step_is_answered_then_the_connection_closes(
    listener, requests, last_code
):
    c = await _connect(listener)
    for body in requests[:-1]:
        assert (await c.call(body)).error_code == 0
    assert (await c.call(requests[-1])).error_code == last_code
    assert await c.closed()


@pytest.mark.parametrize("listener", ["PLAINTEXT"], indirect=True)
@pytest.mark.parametrize("body", [HANDSHAKE, AUTHENTICATE])
async def test_a_listener_without_sasl_refuses_sasl_and_serves_at_once(listener, body):
    c = await _connect(listener)
    assert await c.call(_metadata()) is not None  # read and answered
    assert listener.open_connections() == {("PLAINTEXT", "User:ANONYMOUS"): 1}
    assert (await c.call(body)).error_code == ILLEGAL
    assert await c.closed()
