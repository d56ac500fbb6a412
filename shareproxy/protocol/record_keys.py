"""The keys of a v2 record batch's records, for key-ordered delivery: aiokafka's record
reader parses (and decompresses) the batch; each key becomes its hash (core.key_order)."""

from __future__ import annotations

from aiokafka.errors import UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatch

from shareproxy.core.key_order import NO_KEY, key_hash
from shareproxy.protocol.record_batch import RecordBatchError


def batch_key_hashes(
    data: bytes | memoryview, base_offset: int, last_offset: int
) -> tuple[int, ...]:
    """The key hash of each offset base..last (NO_KEY where a record has no key, or where
    compaction left no record)."""
    hashes = [NO_KEY] * (last_offset - base_offset + 1)
    try:
        for record in DefaultRecordBatch(bytes(data)):
            key = record.key
            if key is not None:
                hashes[record.offset - base_offset] = key_hash(key)
    except UnsupportedCodecError as exc:
        raise RecordBatchError(f"batch at offset {base_offset}: {exc}") from exc
    except (ValueError, IndexError) as exc:
        raise RecordBatchError(f"batch at offset {base_offset} has unreadable records") from exc
    return tuple(hashes)
