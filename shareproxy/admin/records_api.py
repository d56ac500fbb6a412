"""HTTP consumption for clients without a Kafka share consumer.

Stateless: a fetch acquires records for a ``consumer_id`` the client names (or one is made up and
returned), and an acknowledgement names it again, so any request can reach any proxy worker. Same
engine, same acquisition locks and same durability as ShareFetch: a record a Kafka consumer of the
group holds is never handed out here, and the reverse.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal
from uuid import UUID

from aiokafka.record.memory_records import MemoryRecords
from fastapi import APIRouter
from pydantic import BaseModel, Field

from shareproxy.admin.auth import CallerDep
from shareproxy.admin.params import MAX_INT32, MAX_INT64, Exact, GroupId
from shareproxy.broker.consumers import Acquisition, FetchLimits, ShareConsumers, TopicPartition
from shareproxy.config import MAX_FETCH_WAIT_MS
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.states import AcknowledgeType, AcquireMode

ConsumerId = Annotated[str, Field(min_length=1, max_length=255)]
_ACK_TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
    "renew": AcknowledgeType.RENEW,
}


class FetchRequest(Exact):
    topics: list[str] = Field(min_length=1)
    consumer_id: ConsumerId | None = Field(
        default=None, description="who holds the acquired records; made up if absent"
    )
    max_records: int = Field(default=500, ge=1, le=10_000)
    max_wait_ms: int = Field(default=500, ge=0, le=MAX_FETCH_WAIT_MS)
    max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)


class Header(BaseModel):
    key: str
    value: str | None
    value_encoding: Literal["utf-8", "base64"] = "utf-8"


class Record(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    key_encoding: Literal["utf-8", "base64"] = "utf-8"
    value: str | None
    value_encoding: Literal["utf-8", "base64"] = "utf-8"
    headers: list[Header]
    delivery_count: int
    lock_expires_at_ms: int


class FetchResponse(BaseModel):
    consumer_id: str
    records: list[Record]


class Acknowledgement(Exact):
    topic: str
    partition: int = Field(ge=0, le=MAX_INT32)
    first_offset: int = Field(ge=0, le=MAX_INT64)
    last_offset: int = Field(ge=0, le=MAX_INT64)
    type: Literal["accept", "release", "reject", "renew"]


class AcknowledgeRequest(Exact):
    consumer_id: ConsumerId
    acknowledgements: list[Acknowledgement] = Field(min_length=1)


class PartitionResult(BaseModel):
    topic: str
    partition: int
    error_code: str | None
    message: str | None = None


class AcknowledgeResponse(BaseModel):
    results: list[PartitionResult]


def _text(data: bytes | None) -> tuple[str | None, Literal["utf-8", "base64"]]:
    """UTF-8 text when the bytes are text, base64 otherwise: bytes are never altered."""
    if data is None:
        return None, "utf-8"
    try:
        return bytes(data).decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(bytes(data)).decode("ascii"), "base64"


def records_of(
    topic: str, partition: int, acquisition: Acquisition, lock_expires_at_ms: int
) -> list[Record]:
    """Decode the acquired records out of the batches the Kafka path sends as they are."""
    wanted = [(a.first_offset, a.last_offset, a.delivery_count) for a in acquisition.acquired]
    out: list[Record] = []
    batches = MemoryRecords(bytes(acquisition.records))
    while batches.has_next():
        batch = batches.next_batch()
        if batch.is_control_batch:
            continue
        for rec in batch:
            count = next((dc for f, last, dc in wanted if f <= rec.offset <= last), None)
            if count is None:
                continue
            key, key_enc = _text(rec.key)
            value, value_enc = _text(rec.value)
            headers = []
            for name, raw in rec.headers:
                hv, h_enc = _text(raw)
                headers.append(Header(key=name, value=hv, value_encoding=h_enc))
            out.append(
                Record(
                    topic=topic,
                    partition=partition,
                    offset=rec.offset,
                    timestamp=rec.timestamp,
                    key=key,
                    key_encoding=key_enc,
                    value=value,
                    value_encoding=value_enc,
                    headers=headers,
                    delivery_count=count,
                    lock_expires_at_ms=lock_expires_at_ms,
                )
            )
    return out


def router(consumers: ShareConsumers) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["HTTP consumption"])

    @r.post("/{group_id}/records/fetch", response_model=FetchResponse)
    async def fetch(
        group_id: GroupId,
        request: FetchRequest,
        caller: CallerDep,
    ) -> FetchResponse:
        """Acquire up to ``max_records`` records, waiting up to ``max_wait_ms`` for some."""
        caller.require_read(group_id, request.topics)
        consumer_id = request.consumer_id or f"http-{uuid.uuid4()}"
        topics = await consumers.named(request.topics)
        got = await consumers.fetch(
            group_id,
            consumer_id,
            [(t.topic_id, p) for t in topics for p in t.partitions],
            FetchLimits(
                max_wait_ms=request.max_wait_ms,
                max_records=request.max_records,
                max_bytes=request.max_bytes,
                mode=AcquireMode.RECORD_LIMIT,  # records are decoded here: the limit is exact
            ),
        )
        expires = consumers.lock_expiry_ms(group_id)
        names = {t.topic_id: t.name for t in topics}
        records: list[Record] = []
        for (topic_id, partition), acquisition in sorted(got.items(), key=_by_name(names)):
            records += records_of(names[topic_id], partition, acquisition, expires)
        return FetchResponse(consumer_id=consumer_id, records=records)

    @r.post("/{group_id}/records/acknowledge", response_model=AcknowledgeResponse)
    async def acknowledge(
        group_id: GroupId,
        request: AcknowledgeRequest,
        caller: CallerDep,
    ) -> AcknowledgeResponse:
        """Accept, release, reject or renew acquired offset ranges; each partition's result is
        durable before this answers (all of them in one commit)."""
        caller.require_read(group_id, (a.topic for a in request.acknowledgements))
        per_partition: dict[tuple[str, int], list[AckBatch]] = {}
        for a in request.acknowledgements:
            if a.last_offset < a.first_offset:
                raise ShareError(
                    ErrorCode.INVALID_REQUEST,
                    f"{a.topic}-{a.partition}: last_offset {a.last_offset} "
                    f"< first_offset {a.first_offset}",
                )
            per_partition.setdefault((a.topic, a.partition), []).append(
                AckBatch(a.first_offset, a.last_offset, (int(_ACK_TYPES[a.type]),))
            )
        for batches in per_partition.values():
            batches.sort(key=lambda b: b.first_offset)
        known = {t.name: t for t in consumers.known(name for name, _ in per_partition)}
        by_id: dict[TopicPartition, tuple[str, int]] = {}
        results: dict[tuple[str, int], int] = {}
        for topic, partition in per_partition:
            found = known.get(topic)
            if found is None or partition not in found.partitions:
                results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                by_id[(found.topic_id, partition)] = (topic, partition)
        codes = await consumers.acknowledge(
            group_id, request.consumer_id, {tp: per_partition[named] for tp, named in by_id.items()}
        )
        results.update({by_id[tp]: code for tp, code in codes.items()})
        return AcknowledgeResponse(
            results=[
                PartitionResult(
                    topic=topic,
                    partition=partition,
                    error_code=None if code == ErrorCode.NONE else ErrorCode(code).name,
                )
                for (topic, partition), code in ((named, results[named]) for named in per_partition)
            ]
        )

    return r


def _by_name(names: dict[UUID, str]) -> Callable[[tuple[TopicPartition, Acquisition]], Any]:
    """Records in topic-name then partition order, as the request named them."""
    return lambda item: (names[item[0][0]], item[0][1])
