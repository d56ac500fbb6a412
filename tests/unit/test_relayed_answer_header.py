"""A relayed answer goes back under the response header kio would write for its API and version,
packed by hand: header v1 (with its empty tag buffer) for flexible versions, v0 for the others
and for every ApiVersions answer."""

from __future__ import annotations

import struct

import pytest
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import (
    RawResponse,
    encode_response_chunks,
    response_type,
    writer_for,
)

EVERY_RESPONSE = [
    (key, version)
    for key, name in api_key_map.items()
    for version, entities in schema_name_map[name].items()
    if EntityType.response in entities
]


class _Out:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)


def _kio_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    header_cls = response_type(api_key, api_version).__header_schema__
    out = _Out()
    writer_for(header_cls)(out, header_cls(correlation_id=correlation_id))
    return b"".join(out.parts)


@pytest.mark.parametrize(("api_key", "api_version"), EVERY_RESPONSE)
def test_a_relayed_answer_has_the_header_kio_writes(api_key: int, api_version: int) -> None:
    body = b"\x00\x07the broker's bytes"
    header = _kio_header(api_key, api_version, -2_000_000_001)
    frame = b"".join(
        encode_response_chunks(-2_000_000_001, RawResponse(api_key, api_version, body))
    )
    assert frame == struct.pack(">i", len(header) + len(body)) + header + body


def test_api_versions_answers_keep_header_v0_in_flexible_versions() -> None:
    frame = b"".join(encode_response_chunks(7, RawResponse(ApiKey.API_VERSIONS, 3, b"\x00")))
    assert frame == struct.pack(">ii", 5, 7) + b"\x00"


def test_a_relayed_body_is_passed_on_as_the_view_it_came_in() -> None:
    body = memoryview(bytearray(b"\x00" * 64))[8:]
    chunks = encode_response_chunks(1, RawResponse(ApiKey.PRODUCE, 9, body))
    assert chunks[-1] is body
