"""Headers of v2 record batches, read without touching the records.

Layout (magic 2), offsets in bytes:
  0 baseOffset int64 · 8 batchLength int32 · 12 partitionLeaderEpoch int32 · 16 magic int8
  17 crc uint32 · 21 attributes int16 · 23 lastOffsetDelta int32 · 27 baseTimestamp int64
  35 maxTimestamp int64 · 43 producerId int64 · 51 producerEpoch int16 · 53 baseSequence int32
  57 records count int32 · 61 records…
attributes: bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control.
A fetch may end in a partial batch; it is left out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from shareproxy.core.errors import ErrorCode

_HEAD = struct.Struct(">qiib")
_ATTRS = struct.Struct(">hi")
_ATTRS_ONLY = struct.Struct(">h")
_PRODUCER = struct.Struct(">q")
_MAX_TS = struct.Struct(">q")
HEADER_BYTES = 61
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class RecordBatchError(ValueError):
    """Bytes that cannot be v2 record batches."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    base_offset: int
    last_offset: int
    is_transactional: bool
    is_control: bool
    producer_id: int
    max_timestamp: int
    start: int  # byte range of the whole batch in the buffer
    end: int


def scan_batches(data: bytes | memoryview) -> list[BatchInfo]:
    """Every whole batch in ``data``, in order."""
    out = []
    pos = 0
    n = len(data)
    while n - pos >= HEADER_BYTES:
        base, length, _epoch, magic = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if length < HEADER_BYTES - 12:
            raise RecordBatchError(f"record batch at byte {pos} has length {length}")
        if end > n:
            break  # partial trailing batch
        if magic != 2:
            raise RecordBatchError(f"record batch at byte {pos} has magic {magic}, expected 2")
        attrs, last_delta = _ATTRS.unpack_from(data, pos + 21)
        (max_ts,) = _MAX_TS.unpack_from(data, pos + 35)
        (producer_id,) = _PRODUCER.unpack_from(data, pos + 43)
        out.append(
            BatchInfo(
                base,
                base + last_delta,
                bool(attrs & _TRANSACTIONAL),
                bool(attrs & _CONTROL),
                producer_id,
                max_ts,
                pos,
                end,
            )
        )
        pos = end
    return out


def first_timestamp(batch: bytes | memoryview) -> int:
    """The timestamp (ms) of a batch's first record, ``batch`` starting at its header: the
    base timestamp, or the broker's append time (maxTimestamp) under LogAppendTime, which
    stands for every record's."""
    (attrs,) = _ATTRS_ONLY.unpack_from(batch, 21)
    (ts,) = _MAX_TS.unpack_from(batch, 35 if attrs & _LOG_APPEND_TIME else 27)
    return int(ts)


def is_compressed(batch: bytes | memoryview) -> bool:
    """Whether a batch's records are compressed, ``batch`` starting at its header."""
    (attrs,) = _ATTRS_ONLY.unpack_from(batch, 21)
    return bool(attrs & _COMPRESSION_MASK)


ABORT_MARKER = 0
COMMIT_MARKER = 1


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint (the record format's) and the position after it."""
    shift = result = 0
    while True:
        if pos >= len(data):
            raise RecordBatchError("truncated varint in a record")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def control_marker(data: bytes | memoryview, info: BatchInfo) -> int:
    """ABORT_MARKER or COMMIT_MARKER of a control batch (its first record's key holds
    version int16 and type int16; control batches are never compressed)."""
    pos = info.start + HEADER_BYTES
    _, pos = _varint(data, pos)  # record length
    pos += 1  # attributes
    _, pos = _varint(data, pos)  # timestamp delta
    _, pos = _varint(data, pos)  # offset delta
    key_length, pos = _varint(data, pos)
    if key_length < 4 or pos + 4 > info.end:
        raise RecordBatchError(f"control batch at offset {info.base_offset} has no marker key")
    return int.from_bytes(data[pos + 2 : pos + 4], "big", signed=True)


_COMPRESSION_MASK = 0x07
ZSTD = 4


def first_record_at(data: bytes | memoryview, info: BatchInfo, timestamp_ms: int) -> int | None:
    """The offset of the batch's first record stamped at or after ``timestamp_ms``, as Kafka's
    ListOffsets finds it; None when none is. A compressed batch is not opened: its first
    record stands for it (no later record is skipped). Under LogAppendTime every record bears
    the batch's time."""
    if info.max_timestamp < timestamp_ms:
        return None
    (attrs,) = _ATTRS_ONLY.unpack_from(data, info.start + 21)
    if attrs & (_COMPRESSION_MASK | _LOG_APPEND_TIME):
        return info.base_offset
    (base_ts,) = _MAX_TS.unpack_from(data, info.start + 27)
    pos = info.start + HEADER_BYTES
    while pos < info.end:
        length, pos = _varint(data, pos)
        after = pos + length
        ts_delta, at = _varint(data, pos + 1)  # after the record's attributes
        offset_delta, _ = _varint(data, at)
        if base_ts + ts_delta >= timestamp_ms:
            return info.base_offset + offset_delta
        pos = after
    return None


def produce_problem(records: bytes | None, api_version: int) -> tuple[ErrorCode, str] | None:
    """Why a Produce partition's records are not what Kafka's broker accepts (exactly one
    whole v2 batch; zstd only from v7), with the error Kafka gives, or None. Checked before
    forwarding, so a produce the upstream would refuse — or choke on — never reaches it."""
    invalid = ErrorCode.INVALID_RECORD
    if not records:
        return invalid, f"Produce v{api_version} must carry one record batch per partition"
    if len(records) < HEADER_BYTES:
        return invalid, f"a record batch of {len(records)} bytes is shorter than its header"
    _base, length, _epoch, magic = _HEAD.unpack_from(records, 0)
    if magic != 2:
        return invalid, f"Produce v{api_version} takes record batches of magic 2, not {magic}"
    if 12 + length < len(records):
        return invalid, f"Produce v{api_version} takes exactly one record batch per partition"
    if 12 + length > len(records) or length < HEADER_BYTES - 12:
        return ErrorCode.CORRUPT_MESSAGE, (
            f"the record batch's length field says {12 + length} bytes; {len(records)} were sent"
        )
    (attributes, _) = _ATTRS.unpack_from(records, 21)
    if api_version < 7 and attributes & _COMPRESSION_MASK == ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, (
            f"Produce v{api_version} cannot carry zstd-compressed batches (v7 and later can)"
        )
    return None
