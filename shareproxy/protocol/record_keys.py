"""The keys of a v2 record batch's records, for key-ordered delivery: aiokafka's record
reader parses (and decompresses) the batch; each key becomes its hash (core.key_order)."""

from __future__ import annotations

import logging

from aiokafka.record.default_records import DefaultRecordBatch

from shareproxy.core.key_order import NO_KEY, UNREADABLE_KEY, key_hash

log = logging.getLogger(__name__)


def batch_key_hashes(
    data: bytes | memoryview, base_offset: int, last_offset: int
) -> tuple[int, ...]:
    """The key hash of each offset base..last (NO_KEY where a record has no key, or where
    compaction left no record). A batch whose records cannot be read (corrupt, or a codec
    failing) is delivered as it came, its records ordered as one key among themselves."""
    hashes = [NO_KEY] * (last_offset - base_offset + 1)
    try:
        for record in DefaultRecordBatch(bytes(data)):
            key = record.key
            if key is not None:
                hashes[record.offset - base_offset] = key_hash(key)
    except Exception as exc:  # the reader and each codec raise their own kinds
        log.warning(
            "keys of the batch at offset %d unreadable (%s): ordered as one", base_offset, exc
        )
        return (UNREADABLE_KEY,) * len(hashes)
    return tuple(hashes)
