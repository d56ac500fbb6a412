"""ShareFetch and ShareAcknowledge responses (v1-v2) encoded by hand, record batches by reference.

These answers carry most of the proxy's bytes, one per fetch: building kio entities per
partition and letting kio's writer emit a buffer per field cost more CPU than the records'
journey through the kernel. Here the few fixed fields go into one ``bytearray`` between record
batches, and each batch travels as the very object it arrived in, so ``writelines`` gets a
handful of chunks (one vectored write) and no record byte is copied by Python. The bytes are
exactly kio's encoding of the same response (``tests/unit/test_share_responses.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar
from uuid import UUID

from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import RESPONSE_HEADER_BYTES, EncodedResponse

_ENVELOPE = struct.Struct(">ih")  # throttle time (ms), error code
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ih")  # partition index, error code
_LEADER = struct.Struct(">iib")  # leader id, leader epoch, tags
_ACQUIRED = struct.Struct(">qqhb")  # first offset, last offset, delivery count, tags
_NULL = b"\x00"  # a null compact string; also an empty tag buffer
_SMALL = tuple(bytes((i,)) for i in range(0x80))  # one-byte unsigned varints
# ShareAcknowledge v1 has no AcquisitionLockTimeoutMs; every ShareFetch version has it
_LOCK_TIMEOUT_SINCE: dict[int, int] = {ApiKey.SHARE_FETCH: 1, ApiKey.SHARE_ACKNOWLEDGE: 2}


class AcquiredRun(Protocol):
    """One AcquiredRecords entry (``core.inflight.AcquiredRange`` is one)."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def delivery_count(self) -> int: ...


# partition index, error code, message, acknowledge error code, message, leader id, leader
# epoch, record batches, acquired runs
FetchedPartition = tuple[
    int, int, str | None, int, str | None, int, int, bytes | memoryview, Sequence[AcquiredRun]
]
# partition index, error code, message, leader id, leader epoch
AcknowledgedPartition = tuple[int, int, str | None, int, int]
# node id, host, port, rack
Endpoint = tuple[int, str, int, str | None]
E_contra = TypeVar("E_contra", contravariant=True)


class Encoder(Protocol[E_contra]):
    """``share_fetch`` or ``share_acknowledge``: a response from its topics' entries."""

    def __call__(
        self,
        api_version: int,
        lock_timeout_ms: int,
        topics: Iterable[tuple[UUID, Sequence[E_contra]]],
        endpoints: Sequence[Endpoint] = (),
        count: int | None = None,
        error_code: int = 0,
        error_message: str | None = None,
    ) -> EncodedResponse: ...


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(buf: bytearray, value: str | None) -> None:
    """A compact nullable string."""
    if value is None:
        buf += _NULL
        return
    data = value.encode()
    buf += _uvarint(len(data) + 1)
    buf += data


def _envelope(
    api_key: int,
    api_version: int,
    lock_timeout_ms: int,
    error_code: int,
    error_message: str | None,
    topics: int,
) -> bytearray:
    buf = bytearray(RESPONSE_HEADER_BYTES)
    buf += _ENVELOPE.pack(0, error_code)
    _string(buf, error_message)
    if api_version >= _LOCK_TIMEOUT_SINCE[api_key]:
        buf += _I32.pack(lock_timeout_ms)
    buf += _uvarint(topics + 1)
    return buf


def _endpoints(buf: bytearray, endpoints: Sequence[Endpoint]) -> None:
    buf += _uvarint(len(endpoints) + 1)
    for node_id, host, port, rack in endpoints:
        buf += _I32.pack(node_id)
        _string(buf, host)
        buf += _I32.pack(port)
        _string(buf, rack)
        buf += _NULL
    buf += _NULL  # the response's tags


def share_fetch(
    api_version: int,
    lock_timeout_ms: int,
    topics: Iterable[tuple[UUID, Sequence[FetchedPartition]]],
    endpoints: Sequence[Endpoint] = (),
    count: int | None = None,
    error_code: int = 0,
    error_message: str | None = None,
) -> EncodedResponse:
    """A ShareFetch response of ``count`` topics (``len(topics)`` when None)."""
    if count is None:
        topics = list(topics)
        count = len(topics)
    buf = _envelope(
        ApiKey.SHARE_FETCH, api_version, lock_timeout_ms, error_code, error_message, count
    )
    chunks: list[bytes | bytearray | memoryview] = [buf]
    size = 0
    for topic_id, partitions in topics:
        buf += topic_id.bytes
        buf += _uvarint(len(partitions) + 1)
        for index, code, message, ack_code, ack_message, leader, epoch, records, runs in partitions:
            buf += _PARTITION.pack(index, code)
            _string(buf, message)
            buf += _I16.pack(ack_code)
            _string(buf, ack_message)
            buf += _LEADER.pack(leader, epoch, 0)
            n = len(records)
            buf += _uvarint(n + 1)
            if n:  # the batches as they came: the chunk before them ends here
                size += len(buf)
                chunks.append(records)
                size += n
                buf = bytearray()
                chunks.append(buf)
            buf += _uvarint(len(runs) + 1)
            for r in runs:
                buf += _ACQUIRED.pack(r.first_offset, r.last_offset, r.delivery_count, 0)
            buf += _NULL  # the partition's tags
        buf += _NULL  # the topic's tags
    _endpoints(buf, endpoints)
    size += len(buf)
    return EncodedResponse(chunks, size, error_code)


def share_acknowledge(
    api_version: int,
    lock_timeout_ms: int,
    topics: Iterable[tuple[UUID, Sequence[AcknowledgedPartition]]],
    endpoints: Sequence[Endpoint] = (),
    count: int | None = None,
    error_code: int = 0,
    error_message: str | None = None,
) -> EncodedResponse:
    """A ShareAcknowledge response of ``count`` topics (``len(topics)`` when None)."""
    if count is None:
        topics = list(topics)
        count = len(topics)
    buf = _envelope(
        ApiKey.SHARE_ACKNOWLEDGE, api_version, lock_timeout_ms, error_code, error_message, count
    )
    for topic_id, partitions in topics:
        buf += topic_id.bytes
        buf += _uvarint(len(partitions) + 1)
        for index, code, message, leader, epoch in partitions:
            buf += _PARTITION.pack(index, code)
            _string(buf, message)
            buf += _LEADER.pack(leader, epoch, 0)
            buf += _NULL
        buf += _NULL
    _endpoints(buf, endpoints)
    return EncodedResponse([buf], len(buf), error_code)
