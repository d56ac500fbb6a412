"""HTTP consumption for clients without a Kafka share consumer.

Stateless: a fetch acquires records for a ``consumer_id`` the client names (or one is made up and
returned), and an acknowledgement names it again, so any request can reach any proxy worker. In
a cluster any node answers for every partition, passing the parts other nodes lead on to them
(``records_spread``). Same engine, same acquisition locks and same durability as ShareFetch: a
record a Kafka consumer of the group holds is never handed out here, and the reverse.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from shareproxy.admin.answering import GroupGathering, every_node
from shareproxy.admin.params import Exact
from shareproxy.admin.records_spread import answer_of, by_leader, shares
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acl import Operation
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import MAX_INT32, MAX_INT64
from shareproxy.core.states import AcknowledgeType, AcquireMode
from shareproxy.runtime.consuming import (
    Acquisition,
    FetchLimits,
    NamedTopic,
    ShareConsumers,
    TopicPartition,
    records_in,
)
from shareproxy.runtime.groups import GroupAdmin
from shareproxy.settings.model import MAX_FETCH_WAIT_MS
from shareproxy.telemetry.logs import first_line

T = TypeVar("T")
log = logging.getLogger(__name__)
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
    unreached: list[str] = Field(
        default=[], description="nodes whose partitions are not in this answer, and why"
    )


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
    """The acquired records as the API shows them: text where the bytes are UTF-8."""
    out: list[Record] = []
    for rec in records_in(acquisition):
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
                timestamp=rec.timestamp_ms,
                key=key,
                key_encoding=key_enc,
                value=value,
                value_encoding=value_enc,
                headers=headers,
                delivery_count=rec.delivery_count,
                lock_expires_at_ms=lock_expires_at_ms,
            )
        )
    return out


def router(consumers: ShareConsumers, admin: GroupAdmin) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["HTTP consumption"])
    leader_at = admin.records.leader_at

    @r.post("/{group_id:name}/records/fetch", response_model=FetchResponse)
    async def fetch(
        call: Annotated[GroupGathering, Depends(every_node(Operation.READ))],
        request: FetchRequest,
    ) -> FetchResponse:
        """Acquire up to ``max_records`` records, waiting up to ``max_wait_ms`` for some: from
        the partitions this node leads, and, made there at once, from each other live node
        leading some of them, ``max_records`` split by the partitions each leads."""
        group_id, others = call.group_id, call.others
        call.caller.require_topics(Operation.READ, request.topics)
        consumer_id = request.consumer_id or f"http-{uuid.uuid4()}"
        topics = await consumers.named(request.topics)
        names = {t.topic_id: t.name for t in topics}
        here, elsewhere = by_leader(
            [(t.topic_id, p) for t in topics for p in t.partitions], leader_at, others.passed_on
        )
        counts = [len(tps) for _, tps in elsewhere.values()]
        local_share, *peer_shares = shares(request.max_records, [len(here), *counts])
        asked = [
            answer_of(
                others,
                node,
                {**request.model_dump(), "consumer_id": consumer_id, "max_records": share},
                FetchResponse.model_validate,
                request.max_wait_ms,
            )
            for (node, _), share in zip(elsewhere.values(), peer_shares, strict=True)
        ]
        limits = FetchLimits(
            max_wait_ms=request.max_wait_ms,
            max_records=local_share,
            max_bytes=request.max_bytes,
            mode=AcquireMode.RECORD_LIMIT,  # records are decoded here: the limit is exact
        )
        local = consumers.fetch(group_id, consumer_id, here, limits) if here or not asked else None
        got, answers = await asyncio.gather(
            _outcome(local if local is not None else _nothing()), asyncio.gather(*asked)
        )
        records: list[Record] = []
        unreached: list[str] = []
        for answer in answers:
            if isinstance(answer, FetchResponse):
                records += answer.records
            else:
                unreached.append(str(answer))
        if isinstance(got, Exception):
            if not records:  # nothing acquired anywhere: this node's error is the answer
                raise got
            # what the other nodes acquired is never dropped: this node's failure is said
            log.warning("fetch for %s on this node failed: %s", group_id, first_line(got))
            unreached.append(f"this node: {first_line(got) or type(got).__name__}")
        else:
            expires = consumers.lock_expiry_ms(group_id)
            for (topic_id, partition), acquisition in sorted(got.items(), key=_by_name(names)):
                records += records_of(names[topic_id], partition, acquisition, expires)
        records.sort(key=lambda x: (x.topic, x.partition, x.offset))
        return FetchResponse(consumer_id=consumer_id, records=records, unreached=unreached)

    @r.post("/{group_id:name}/records/acknowledge", response_model=AcknowledgeResponse)
    async def acknowledge(
        call: Annotated[GroupGathering, Depends(every_node(Operation.READ))],
        request: AcknowledgeRequest,
    ) -> AcknowledgeResponse:
        """Accept, release, reject or renew acquired offset ranges; each partition's result is
        durable before this answers (those this node leads in one commit, the others on the
        node leading them, one call per node)."""
        group_id, others = call.group_id, call.others
        call.caller.require_topics(Operation.READ, (a.topic for a in request.acknowledgements))
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
        known = {t.name: t for t in await _topics(consumers, (n for n, _ in per_partition))}
        by_id: dict[TopicPartition, tuple[str, int]] = {}
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        for topic, partition in per_partition:
            found = known.get(topic)
            if found is None or partition not in found.partitions:
                results[(topic, partition)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            else:
                by_id[(found.topic_id, partition)] = (topic, partition)
        here, elsewhere = by_leader(by_id, leader_at, others.passed_on)
        asked = []
        for node, tps in elsewhere.values():
            theirs = {by_id[tp] for tp in tps}
            acks = [a for a in request.acknowledgements if (a.topic, a.partition) in theirs]
            body = AcknowledgeRequest(consumer_id=request.consumer_id, acknowledgements=acks)
            asked.append(
                answer_of(others, node, body.model_dump(), AcknowledgeResponse.model_validate)
            )
        local_acks = {tp: per_partition[by_id[tp]] for tp in here}
        codes, answers = await asyncio.gather(
            _outcome(consumers.acknowledge(group_id, request.consumer_id, local_acks)),
            asyncio.gather(*asked),
        )
        if isinstance(codes, Exception):
            if not isinstance(codes, ShareError) or not elsewhere:
                raise codes
            # the other nodes' results stand: this node's error is said per partition
            results.update({by_id[tp]: (codes.code, codes.message) for tp in here})
        else:
            results.update({by_id[tp]: (code, None) for tp, code in codes.items()})
        for (node, tps), answer in zip(elsewhere.values(), answers, strict=True):
            theirs = {by_id[tp] for tp in tps}
            if isinstance(answer, AcknowledgeResponse):
                for x in answer.results:
                    if (x.topic, x.partition) in theirs:
                        results[(x.topic, x.partition)] = (_code(x.error_code), x.message)
                answer = f"{node.described}: no result for it"
            for named in theirs:  # not answered for: retry (it may have been applied there)
                results.setdefault(named, (ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{answer}; retry"))
        return AcknowledgeResponse(
            results=[
                PartitionResult(
                    topic=topic,
                    partition=partition,
                    error_code=None if code == ErrorCode.NONE else ErrorCode(code).name,
                    message=message,
                )
                for (topic, partition), (code, message) in (
                    (named, results[named]) for named in per_partition
                )
            ]
        )

    return r


def _code(name: str | None) -> ErrorCode:
    """A per-partition error code as another node named it."""
    if name is None:
        return ErrorCode.NONE
    return ErrorCode.__members__.get(name, ErrorCode.UNKNOWN_SERVER_ERROR)


async def _nothing() -> dict[TopicPartition, Acquisition]:
    return {}


async def _outcome(job: Awaitable[T]) -> T | Exception:
    """The job's result or its error, so the answers of the other nodes are kept either way."""
    try:
        return await job
    except Exception as exc:  # handed back to the caller, who decides
        return exc


async def _topics(consumers: ShareConsumers, names: Iterable[str]) -> list[NamedTopic]:
    """The named topics: those the runtime knows, and any other the cluster has (a node may
    be asked to acknowledge records another node fetched); an unknown one is left out."""
    wanted = list(dict.fromkeys(names))
    found = consumers.known(wanted)
    for name in set(wanted) - {t.name for t in found}:
        with contextlib.suppress(ShareError):  # UNKNOWN_TOPIC_OR_PARTITION in its results
            found += await consumers.named([name])
    return found


def _by_name(names: dict[UUID, str]) -> Callable[[tuple[TopicPartition, Acquisition]], Any]:
    """Records in topic-name then partition order, as the request named them."""
    return lambda item: (names[item[0][0]], item[0][1])
