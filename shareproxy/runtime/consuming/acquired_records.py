"""The records an acquisition holds, one by one: what the front ends that hand records out
singly (the HTTP records API, push) need of the batches the Kafka path sends whole. Control
records and the batches' records outside the acquired ranges are left out."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from aiokafka.record.memory_records import MemoryRecords

from shareproxy.runtime.consuming.leader import Acquisition


@dataclass(frozen=True, slots=True)
class AcquiredRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]
    delivery_count: int


def records_in(acquisition: Acquisition) -> Iterator[AcquiredRecord]:
    wanted = [(a.first_offset, a.last_offset, a.delivery_count) for a in acquisition.acquired]
    batches = MemoryRecords(bytes(acquisition.records))
    while batches.has_next():
        batch = batches.next_batch()
        if batch.is_control_batch:
            continue
        for rec in batch:
            count = next((dc for f, last, dc in wanted if f <= rec.offset <= last), None)
            if count is None:
                continue
            yield AcquiredRecord(
                rec.offset,
                rec.timestamp,
                None if rec.key is None else bytes(rec.key),
                None if rec.value is None else bytes(rec.value),
                [(name, None if raw is None else bytes(raw)) for name, raw in rec.headers],
                count,
            )
