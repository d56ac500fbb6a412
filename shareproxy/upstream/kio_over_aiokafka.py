"""Send kio-typed requests over aiokafka's connections.

aiokafka owns bootstrap, broker connections, ApiVersions negotiation and SASL/TLS; its protocol
classes stop at old versions (Metadata v5 has no topic ids). Its connection only needs a request
with ``prepare()`` returning an object that builds a header, encodes itself and decodes its
response, so a kio message fits through it unchanged and the response keeps the raw records.
"""

from __future__ import annotations

import functools
import io
import struct
from typing import Any

from shareproxy.protocol.codec import (
    RawResponse,
    Request,
    reader_for,
    request_type,
    response_type,
    write_request_header,
    writer_for,
)
from shareproxy.protocol.kio_types import KioPayloadSchema


class _Header:
    __slots__ = ("_bytes",)

    def __init__(self, data: bytes) -> None:
        self._bytes = data

    def encode(self) -> bytes:
        return self._bytes


class _ResponseType:
    __slots__ = ("cls",)

    def __init__(self, cls: type[KioPayloadSchema]) -> None:
        self.cls = cls

    def decode(self, data: io.BytesIO) -> Any:
        # getvalue() of an unmodified BytesIO is the bytes it was made from (no copy), whereas
        # getbuffer() would copy them first; a fetch response can be megabytes of records
        body, _ = reader_for(self.cls)(data.getvalue(), data.tell())
        return body


class _PreparedKio:
    """What aiokafka's connection calls a request struct."""

    def __init__(self, body: Any, decoder: Any = None) -> None:
        cls: type[KioPayloadSchema] = type(body)
        self.body = body
        self.API_KEY = int(cls.__api_key__)
        self.API_VERSION = int(cls.__version__)
        self.RESPONSE_TYPE: Any = decoder or _ResponseType(
            response_type(self.API_KEY, self.API_VERSION)
        )

    def build_request_header(self, correlation_id: int, client_id: str) -> _Header:
        buf = io.BytesIO()
        write_request_header(buf, type(self.body), correlation_id, client_id)
        return _Header(buf.getvalue())

    def encode(self) -> bytes:
        buf = io.BytesIO()
        cls: type[KioPayloadSchema] = type(self.body)
        writer_for(cls)(buf, self.body)
        return buf.getvalue()

    def parse_response_header(self, data: io.BytesIO) -> Any:
        cls = self.RESPONSE_TYPE.cls.__header_schema__
        header, offset = reader_for(cls)(data.getvalue(), data.tell())
        data.seek(offset)
        return header

    def read_response_header(self, frame: memoryview) -> tuple[Any, int]:
        """The header at the start of a frame (a read-only view), and where the body
        starts."""
        header, offset = reader_for(self.RESPONSE_TYPE.cls.__header_schema__)(frame, 0)
        return header, offset

    def __repr__(self) -> str:
        return f"kio {type(self.body).__name__} v{self.API_VERSION}"


class KioRequest:
    """Pass to ``AIOKafkaConnection.send(KioRequest(body))``; ``decoder`` reads the response
    body instead of kio (it has kio's response class as ``cls`` and a ``decode(BytesIO)``)."""

    def __init__(self, body: Any, decoder: Any = None) -> None:
        self.body = body
        self.decoder = decoder
        self.API_KEY = int(type(body).__api_key__)

    def prepare(self, versions: dict[int, tuple[int, int]]) -> _PreparedKio:
        return _PreparedKio(self.body, self.decoder)


class _RawBody:
    """A response type whose decoding keeps the body's bytes as the broker wrote them."""

    __slots__ = ("api_key", "api_version", "cls")

    def __init__(self, api_key: int, api_version: int) -> None:
        self.api_key, self.api_version = api_key, api_version
        self.cls = response_type(api_key, api_version)

    def decode(self, data: io.BytesIO) -> RawResponse:
        body = memoryview(data.getvalue())[data.tell() :]
        return RawResponse(self.api_key, self.api_version, body)

    def decode_frame(self, frame: memoryview, at: int) -> RawResponse:
        return RawResponse(self.api_key, self.api_version, frame[at:])


class _PreparedRaw(_PreparedKio):
    """A client's request relayed as it was encoded, under the link's correlation id and the
    client's own client id (so the upstream's quotas and logs see the real client)."""

    def __init__(self, request: Request) -> None:
        self.body = request
        self.API_KEY = request.api_key
        self.API_VERSION = request.api_version
        self.RESPONSE_TYPE = _RawBody(request.api_key, request.api_version)
        self._request_cls = request_type(request.api_key, request.api_version)

    def build_request_header(self, correlation_id: int, client_id: str) -> _Header:
        before, after = _header_around(self._request_cls, self.body.client_id)
        return _Header(before + _CORRELATION.pack(correlation_id) + after)

    def encode(self) -> bytes:
        return bytes(self.body.raw_body)

    def encode_parts(self) -> list[bytes | memoryview]:
        """The body as the client sent it, not copied (``FrameConnection.send`` writes it)."""
        return [self.body.raw_body]

    def __repr__(self) -> str:
        return f"relayed api key {self.API_KEY} v{self.API_VERSION}"


_CORRELATION = struct.Struct(">i")


@functools.lru_cache(maxsize=1024)
def _header_around(cls: type[KioPayloadSchema], client_id: str | None) -> tuple[bytes, bytes]:
    """A request header's bytes before and after its correlation id, which is all that
    changes from one relayed request of a client to the next: encoded once per request type
    and client id (a header starts with api key and version, then the correlation id)."""
    buf = io.BytesIO()
    write_request_header(buf, cls, 0, client_id)
    header = buf.getvalue()
    return header[:4], header[8:]


class RawRequest:
    """Pass to ``AIOKafkaConnection.send(RawRequest(request))``: the answer is a RawResponse."""

    ENCODES_IN_PARTS = True  # FrameConnection.send writes its body as a view

    def __init__(self, request: Request) -> None:
        self.request = request
        self.API_KEY = request.api_key

    def prepare(self, versions: dict[int, tuple[int, int]]) -> _PreparedRaw:
        return _PreparedRaw(self.request)
