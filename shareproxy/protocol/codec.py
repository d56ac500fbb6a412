"""Requests in, responses out, through kio's schema-generated types.

Only the request header's fixed prefix (api key, version, correlation id) is read by hand, to
choose the kio type; everything else is kio's.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from shareproxy.protocol.bounds import FrameBoundsError, check_request
from shareproxy.protocol.kio_types import KioPayloadSchema, KioSchema

_PREFIX = struct.Struct(">hhi")
# a flexible response's size prefix, correlation id and empty tag buffer (response header v1)
_FLEXIBLE_HEADER = struct.Struct(">iib")
_PLAIN_HEADER = struct.Struct(">ii")  # response header v0: size prefix and correlation id
RESPONSE_HEADER_BYTES = _FLEXIBLE_HEADER.size


class UnsupportedRequest(Exception):
    """An API key or version the proxy does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"api key {api_key} version {api_version} is not served")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedRequest(Exception):
    """The frame does not decode as the request its header names."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    raw_body: bytes | memoryview = b""  # the body as the client sent it, for relaying unchanged


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body as the upstream broker encoded it (no header): relayed unchanged, under
    the client's correlation id."""

    api_key: int
    api_version: int
    body: bytes | memoryview


@dataclass(slots=True)
class EncodedResponse:
    """A flexible response encoded already, as chunks for ``writelines``: the first starts
    with ``RESPONSE_HEADER_BYTES`` left for the size prefix and response header, filled in
    with the correlation id; ``size`` counts every chunk's bytes."""

    chunks: list[bytes | bytearray | memoryview]
    size: int
    error_code: int = 0


@cache
def reader_for(cls: type[KioSchema]) -> Any:
    return entity_reader(cls)


@cache
def writer_for(cls: type[KioSchema]) -> Any:
    return entity_writer(cls)


@cache
def request_type(api_key: int, api_version: int) -> type[KioPayloadSchema]:
    return cast("type[KioPayloadSchema]", load_request_schema(api_key, api_version))


@cache
def response_type(api_key: int, api_version: int) -> type[KioPayloadSchema]:
    return cast("type[KioPayloadSchema]", load_response_schema(api_key, api_version))


@cache
def flexible_header(api_key: int, api_version: int) -> bool:
    """Whether the response goes with header v1 (a tag buffer after the correlation id): the
    flexible versions, bar ApiVersions, whose response header is always v0."""
    return bool(response_type(api_key, api_version).__header_schema__.__flexible__)


@cache
def kio_versions(api_key: int) -> tuple[int, int]:
    """The request versions kio has a schema for (lowest, highest), from kio's index: no schema
    module is imported until a request names it."""
    try:
        versions = schema_name_map[api_key_map[api_key]]
    except KeyError:
        raise KioIndexError(f"kio has no schema for api key {api_key}") from None
    found = [v for v, entities in versions.items() if EntityType.request in entities]
    if not found:
        raise KioIndexError(f"kio has no schema for api key {api_key}")
    return min(found), max(found)


def peek(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame."""
    if len(frame) < _PREFIX.size:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a header")
    return _PREFIX.unpack_from(frame, 0)


def decode_request(frame: bytes, served: Mapping[int, tuple[int, int]]) -> Request:
    api_key, api_version, correlation_id = peek(frame)
    versions = served.get(api_key)
    if versions is None or not versions[0] <= api_version <= versions[1]:
        raise UnsupportedRequest(api_key, api_version, correlation_id)
    try:
        cls = request_type(api_key, api_version)
    except KioIndexError as exc:
        raise UnsupportedRequest(api_key, api_version, correlation_id) from exc
    try:
        check_request(frame, 0, cls)  # before the native reader allocates what lengths claim
        header, start = reader_for(cls.__header_schema__)(frame, 0)
        body, _ = reader_for(cls)(frame, start)
    except FrameBoundsError as exc:
        raise MalformedRequest(f"api key {api_key} v{api_version}: {exc}") from exc
    except Exception as exc:  # kio raises several types for bad bytes
        raise MalformedRequest(f"api key {api_key} v{api_version}: {exc}") from exc
    return Request(
        api_key, api_version, correlation_id, header.client_id, body, memoryview(frame)[start:]
    )


class _Chunks:
    """A write target that keeps references instead of copying (kio writes through it)."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | bytearray | memoryview] = [b""]
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.parts.append(data)
        n = len(data)
        self.size += n
        return n


def encode_response_chunks(correlation_id: int, body: Any) -> list[bytes | bytearray | memoryview]:
    """A response frame as chunks (size prefix first), for ``writelines``: large record data
    is referenced, not copied; a ``RawResponse`` goes out as it came."""
    if type(body) is EncodedResponse:
        _FLEXIBLE_HEADER.pack_into(body.chunks[0], 0, body.size - 4, correlation_id, 0)
        return body.chunks
    if type(body) is RawResponse:  # the header packed here: kio's writer costs ~10x more
        raw = body.body
        if flexible_header(body.api_key, body.api_version):  # the size prefix counts the rest
            header = _FLEXIBLE_HEADER.pack(_FLEXIBLE_HEADER.size - 4 + len(raw), correlation_id, 0)
        else:
            header = _PLAIN_HEADER.pack(_PLAIN_HEADER.size - 4 + len(raw), correlation_id)
        return [header, raw]
    cls: type[KioPayloadSchema] = type(body)
    header_cls = cls.__header_schema__
    out = _Chunks()
    writer_for(header_cls)(out, header_cls(correlation_id=correlation_id))
    writer_for(cls)(out, body)
    out.parts[0] = struct.pack(">i", out.size)
    # kio writes every field as its own small bytes object (~40 B each, for a 4-byte int): an
    # answer waiting its turn on a connection is kept joined, several times smaller
    return [b"".join(out.parts)]


def encode_response(correlation_id: int, body: Any) -> bytes:
    """A whole response frame (size prefix included) for ``body``, a kio response entity."""
    return b"".join(encode_response_chunks(correlation_id, body))


def write_request_header(
    buf: io.BytesIO, cls: type[KioPayloadSchema], correlation_id: int, client_id: str | None
) -> None:
    """The request header version ``cls`` (a kio request type) is sent with."""
    header_cls = cls.__header_schema__
    writer_for(header_cls)(
        buf,
        header_cls(
            request_api_key=cls.__api_key__,
            request_api_version=cls.__version__,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )


def encode_request(correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """A whole request frame, for tests and for talking Kafka to a peer."""
    cls: type[KioPayloadSchema] = type(body)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    write_request_header(buf, cls, correlation_id, client_id)
    writer_for(cls)(buf, body)
    view = buf.getbuffer()
    struct.pack_into(">i", view, 0, len(view) - 4)
    del view
    return buf.getvalue()


def decode_response(frame: bytes, cls: type[KioPayloadSchema]) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix."""
    header, offset = reader_for(cls.__header_schema__)(frame, 0)
    body, _ = reader_for(cls)(frame, offset)
    return header.correlation_id, body
