"""The ``x-deliver-at`` header of a v2 record batch's records, for scheduled delivery
(core.schedule). Read only for groups that ask for it, and only from batches that may hold the
header: an uncompressed batch whose bytes do not contain its name holds none, which a search in
C decides without reading a record; a compressed batch is read (aiokafka's reader
decompresses it)."""

from __future__ import annotations

import logging
import re

from aiokafka.record.default_records import DefaultRecordBatch

from shareproxy.core.schedule import DELIVER_AT_HEADER, NO_TIME, parse_deliver_at
from shareproxy.protocol.record_batch import is_compressed

log = logging.getLogger(__name__)

_NAME = re.compile(re.escape(DELIVER_AT_HEADER.encode()))


def may_name_times(batch: memoryview) -> bool:
    """Whether a record of this whole batch may carry the header (False: none does)."""
    return is_compressed(batch) or _NAME.search(batch) is not None


def batch_deliver_at(
    batch: memoryview, base_offset: int, last_offset: int
) -> tuple[tuple[int, ...] | None, list[int]]:
    """Each offset's own delivery time (NO_TIME where a record names none, or compaction left
    no record), or None when no record names one; and the offsets whose header is not a time
    (delivered at once). A batch that cannot be read is delivered as it came."""
    if not may_name_times(batch):
        return None, []
    times = [NO_TIME] * (last_offset - base_offset + 1)
    invalid: list[int] = []
    named = False
    try:
        for record in DefaultRecordBatch(bytes(batch)):
            for key, value in record.headers:
                if key != DELIVER_AT_HEADER:
                    continue
                at = parse_deliver_at(value)
                if at is None:
                    invalid.append(record.offset)
                else:
                    times[record.offset - base_offset] = at
                    named = True
    except Exception as exc:  # the reader and each codec raise their own kinds
        log.warning(
            "headers of the batch at offset %d unreadable (%s): delivered at once",
            base_offset,
            exc,
        )
        return None, []
    return (tuple(times) if named else None), invalid
