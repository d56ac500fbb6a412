"""Reads of records the log is known to hold, by the views that read a few records back (a
group's oldest waiting batch, the originals of a redrive), not by consumption.

A broker may answer a Fetch that does not wait before its read of the log is done, with no
records at an offset below its high watermark: Tansu under load does. Such a partition is asked
once more, with a wait, which a broker answers as soon as it has read them; a partition that
is still empty then is empty (retention removed the records, or they are not yet stable)."""

from __future__ import annotations

from shareproxy.core.errors import ErrorCode
from shareproxy.upstream.client import Upstream
from shareproxy.upstream.fetched import PartitionData

# how long the second read of a partition answered without records may wait for them
REREAD_WAIT_MS = 500

TopicPartition = tuple[str, int]


def _answered_too_soon(data: PartitionData | None, offset: int, isolation_level: int) -> bool:
    if data is None or data.error_code != ErrorCode.NONE or data.records:
        return False
    stable = data.last_stable_offset if isolation_level and data.last_stable_offset >= 0 else None
    end = data.high_watermark if stable is None else stable
    return data.log_start_offset <= offset < end


async def fetch_held(
    upstream: Upstream,
    wanted: dict[TopicPartition, int],
    *,
    partition_max_bytes: int,
    isolation_level: int = 0,
) -> dict[TopicPartition, PartitionData]:
    """Record batches at each offset, read without waiting, and again with a wait where the
    broker answered with none although its log holds some there."""
    out = await upstream.fetch(
        wanted, partition_max_bytes=partition_max_bytes, isolation_level=isolation_level
    )
    again = {
        tp: offset
        for tp, offset in wanted.items()
        if _answered_too_soon(out.get(tp), offset, isolation_level)
    }
    if again:
        out.update(
            await upstream.fetch(
                again,
                max_wait_ms=REREAD_WAIT_MS,
                partition_max_bytes=partition_max_bytes,
                isolation_level=isolation_level,
            )
        )
    return out
