"""Copies of records the proxy writes on a group's behalf: the originals read back from the
upstream log, and the producer that writes the copies (acks=all), for the dead-letter writer
and for redrives."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer
from aiokafka.record.memory_records import MemoryRecords

from shareproxy.core.errors import ErrorCode
from shareproxy.upstream.client import PARTITION_MAX_BYTES, Upstream
from shareproxy.upstream.held_reads import fetch_held

PRODUCE_BATCH_BYTES = 1 << 20

Headers = list[tuple[str, bytes | None]]


class CopyError(Exception):
    """The copies could not be written (the producer did not start, or the produce failed)."""


@dataclass(frozen=True, slots=True)
class Original:
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Copy:
    key: bytes | None
    value: bytes | None
    headers: Headers


async def read_originals(
    upstream: Upstream,
    topic: str,
    partition: int,
    first: int,
    last: int,
    isolation_level: int,
) -> dict[int, Original]:
    """Each record of offsets first..last read back from the log (absent where retention
    removed it)."""
    found: dict[int, Original] = {}
    tp = (topic, partition)
    offset = first
    while offset <= last:
        read = await fetch_held(
            upstream,
            {tp: offset},
            partition_max_bytes=PARTITION_MAX_BYTES,
            isolation_level=isolation_level,
        )
        data = read.get(tp)
        if (
            data is not None
            and data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            and offset < data.log_start_offset <= last
        ):
            offset = data.log_start_offset  # retention removed those below: read on from there
            continue
        if data is None or data.error_code or not data.records:
            break
        before = offset
        batches = MemoryRecords(bytes(data.records))  # a view: aiokafka reads bytes
        while batches.has_next():
            batch = batches.next_batch()
            if batch is None:
                break
            for rec in batch:
                if first <= rec.offset <= last:
                    found[rec.offset] = Original(rec.key, rec.value, list(rec.headers))
                offset = max(offset, rec.offset + 1)
        if offset == before:  # nothing past it readable (retention, a partial batch)
            break
    return found


class CopyProducer:
    """One producer, started on first use and kept, for every copy this node writes."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self._producer: AIOKafkaProducer | None = None
        self._starting = asyncio.Lock()

    async def started(self) -> AIOKafkaProducer:
        async with self._starting:
            if self._producer is None:
                producer = AIOKafkaProducer(
                    bootstrap_servers=self.upstream.settings.bootstrap_servers,
                    acks="all",
                    max_batch_size=PRODUCE_BATCH_BYTES,
                    **self.upstream.connection_options(),
                )
                try:
                    await producer.start()
                except Exception as exc:
                    await producer.stop()
                    raise CopyError(f"cannot start the producer: {exc}") from exc
                self._producer = producer
            return self._producer

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def produce(self, topic: str, partition: int, copies: Sequence[Copy]) -> list[int]:
        """Write the copies to one partition, in order; their offsets there. A copy too large
        for a produce batch is refused before anything is sent; any failure of the producer
        is a CopyError."""
        producer = await self.started()
        for i, c in enumerate(copies):
            alone = producer.create_batch()
            if alone.append(key=c.key, value=c.value, timestamp=None, headers=c.headers) is None:
                raise CopyError(f"record {i} is too large for one produce batch")
        sent: list[tuple[asyncio.Future[object], int]] = []
        try:
            batch = producer.create_batch()
            in_batch = 0
            for c in copies:
                if (
                    batch.append(key=c.key, value=c.value, timestamp=None, headers=c.headers)
                    is None
                ):
                    future = await producer.send_batch(batch, topic, partition=partition)
                    sent.append((future, in_batch))
                    batch, in_batch = producer.create_batch(), 0
                    batch.append(key=c.key, value=c.value, timestamp=None, headers=c.headers)
                in_batch += 1
            if batch.record_count():
                future = await producer.send_batch(batch, topic, partition=partition)
                sent.append((future, in_batch))
            done = await asyncio.gather(*(f for f, _ in sent))
        except Exception as exc:
            raise CopyError(f"producing to {topic!r} failed: {exc!r}") from exc
        return [
            meta.offset + i  # type: ignore[attr-defined]  # aiokafka's RecordMetadata
            for meta, (_, n) in zip(done, sent, strict=True)
            for i in range(n)
        ]
