"""A minimal Kafka client for protocol tests: one connection, kio-encoded requests, SASL PLAIN,
raw frames for what no client would send."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from shareproxy.protocol.codec import decode_response, encode_request


class KafkaConnection:
    def __init__(self, port: int, host: str = "127.0.0.1", source: str | None = None) -> None:
        """``source``: the local address to connect from (another loopback address is another
        client host to the proxy)."""
        self.sock = socket.create_connection(
            (host, port), timeout=15, source_address=(source, 0) if source else None
        )
        self.correlation = 0

    def call(self, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(self.correlation, "protocol-test", body))
        cid, response = decode_response(
            self.read_frame(), load_response_schema(body.__api_key__, body.__version__)
        )
        assert cid == self.correlation
        return response

    def read_frame(self) -> bytes:
        """The next response frame, without its size prefix."""
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def plain(self, user: str, password: str) -> Any:
        """SaslHandshake + SaslAuthenticate (PLAIN); the SaslAuthenticate response."""
        shake = self.call(SaslHandshakeRequest(mechanism="PLAIN"))
        assert shake.error_code == 0, shake
        token = b"\x00" + user.encode() + b"\x00" + password.encode()
        return self.call(SaslAuthenticateRequest(auth_bytes=token))

    def send_frame(self, payload: bytes) -> None:
        """A raw request frame (size prefix added), whatever it holds."""
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def closed_by_peer(self, timeout: float = 5) -> bool:
        """True once the proxy has closed the connection without answering."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the proxy")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(port: int, body: Any) -> Any:
    """One request on a connection of its own; the response."""
    with KafkaConnection(port) as c:
        return c.call(body)
