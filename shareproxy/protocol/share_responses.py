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
from collections.abc import Collection, Sequence
from typing import NamedTuple, Protocol, TypeVar
from uuid import UUID

from shareproxy.core.record_views import Records, RecordViews
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


class FetchedPartition(NamedTuple):
    """One partition of a ShareFetch answer, its fields named as in the schema."""

    partition_index: int
    error_code: int
    error_message: str | None
    acknowledge_error_code: int
    acknowledge_error_message: str | None
    leader_id: int
    leader_epoch: int
    records: Records  # whole upstream batches, by reference
    acquired_records: Sequence[AcquiredRun]


class AcknowledgedPartition(NamedTuple):
    """One partition of a ShareAcknowledge answer, its fields named as in the schema."""

    partition_index: int
    error_code: int
    error_message: str | None
    leader_id: int
    leader_epoch: int


# node id, host, port, rack
Endpoint = tuple[int, str, int, str | None]
Endpoints = Sequence[Endpoint]
FetchedTopics = Collection[tuple[UUID, Sequence[FetchedPartition]]]
AcknowledgedTopics = Collection[tuple[UUID, Sequence[AcknowledgedPartition]]]
E_contra = TypeVar("E_contra", contravariant=True)


class Head(NamedTuple):
    """What either answer begins with: the version, the group's lock duration and the
    request's own error (a whole-request refusal carries no topics)."""

    api_version: int
    lock_timeout_ms: int
    error_code: int = 0
    error_message: str | None = None


class Encoder(Protocol[E_contra]):
    """``share_fetch`` or ``share_acknowledge``: a response from its topics' entries."""

    def __call__(
        self,
        head: Head,
        topics: Collection[tuple[UUID, Sequence[E_contra]]],
        endpoints: Endpoints = (),
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


def _envelope(api_key: int, head: Head, topics: int) -> bytearray:
    buf = bytearray(RESPONSE_HEADER_BYTES)
    buf += _ENVELOPE.pack(0, head.error_code)
    _string(buf, head.error_message)
    if head.api_version >= _LOCK_TIMEOUT_SINCE[api_key]:
        buf += _I32.pack(head.lock_timeout_ms)
    buf += _uvarint(topics + 1)
    return buf


def _endpoints(buf: bytearray, endpoints: Endpoints) -> None:
    buf += _uvarint(len(endpoints) + 1)
    for node_id, host, port, rack in endpoints:
        buf += _I32.pack(node_id)
        _string(buf, host)
        buf += _I32.pack(port)
        _string(buf, rack)
        buf += _NULL
    buf += _NULL  # the response's tags


def share_fetch(head: Head, topics: FetchedTopics, endpoints: Endpoints = ()) -> EncodedResponse:
    """A ShareFetch response: fixed fields in few buffers, record batches as they came."""
    buf = _envelope(ApiKey.SHARE_FETCH, head, len(topics))
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
                if isinstance(records, RecordViews):
                    chunks.extend(records.views)
                else:
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
    return EncodedResponse(chunks, size, head.error_code)


def share_acknowledge(
    head: Head, topics: AcknowledgedTopics, endpoints: Endpoints = ()
) -> EncodedResponse:
    """A ShareAcknowledge response, in one buffer."""
    buf = _envelope(ApiKey.SHARE_ACKNOWLEDGE, head, len(topics))
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
    return EncodedResponse([buf], len(buf), head.error_code)
