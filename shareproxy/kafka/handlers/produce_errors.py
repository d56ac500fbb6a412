"""A Produce the upstream failed because its topic was deleted under it.

Tansu answers UNKNOWN_SERVER_ERROR for a partition whose topic is deleted (or deleted and
created again) while a producer writes to it. That code is not retriable, so the producer
drops the records. Kafka's broker answers such a write with a retriable code
(``ReplicaManager.getPartitionOrError``): UNKNOWN_TOPIC_OR_PARTITION while its metadata lacks
the partition, NOT_LEADER_OR_FOLLOWER while the metadata has it but the broker does not host
it (the partition of a topic created again). Either way the client refreshes its metadata and
sends again, and its writes succeed once the topic exists.

So a Produce partition answered UNKNOWN_SERVER_ERROR is looked at again: where its topic is now
missing, was unknown when the request was routed, or has another topic id than then, the code
becomes Kafka's. The write may fail a moment before the deletion shows in the metadata, so the
topic is looked at up to four times within two seconds. A write routed to the topic created again
that fails within seconds of its creation is retriable too (the broker does not serve the new
topic yet). Any other UNKNOWN_SERVER_ERROR is passed on as it came."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Pending
from shareproxy.kafka.contexts import RelayContext
from shareproxy.kafka.responses import KioEntity, error
from shareproxy.protocol.codec import RawResponse, reader_for, response_type
from shareproxy.telemetry.logs import RateLimit
from shareproxy.upstream.client import UpstreamError

log = logging.getLogger(__name__)
log.addFilter(RateLimit())

_DELETED = "the topic was deleted: its metadata will name it once it exists again"
_RECREATED = "the topic was deleted and created again: refresh the metadata"
_LOOKS = (0.0, 0.2, 0.5, 1.0)  # seconds before each look at the topic's metadata
# how long after a topic is seen created again a write to it that fails is taken as one the
# new topic is not ready for
_JUST_CREATED_S = 10.0


def checked(
    ctx: RelayContext, answer: RawResponse | KioEntity, routed: Mapping[str, UUID | None]
) -> RawResponse | KioEntity | Pending:
    """``answer`` as it came where no partition failed with UNKNOWN_SERVER_ERROR (read at
    once, as the answer arrives); else ``retriable_if_deleted`` of it, still to be worked out."""
    read, failed = _failures(answer)
    if not failed:
        return answer
    return Pending(_remapped(ctx, answer, read, failed, routed))


async def retriable_if_deleted(
    ctx: RelayContext, answer: RawResponse | KioEntity, routed: Mapping[str, UUID | None]
) -> RawResponse | KioEntity:
    """``answer`` with each UNKNOWN_SERVER_ERROR of a topic deleted since ``routed`` (the
    topic ids when the request was routed) turned into Kafka's retriable code."""
    read, failed = _failures(answer)
    if not failed:
        return answer
    return await _remapped(ctx, answer, read, failed, routed)


def _failures(answer: RawResponse | KioEntity) -> tuple[Any, set[str]]:
    """The answer read, and the topics with a partition failed UNKNOWN_SERVER_ERROR."""
    read = _read(answer)
    if read is None:
        return None, set()
    failed = {
        t.name
        for t in read.responses
        for p in t.partition_responses
        if p.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    }
    return read, failed


async def _remapped(
    ctx: RelayContext,
    answer: RawResponse | KioEntity,
    read: Any,
    failed: set[str],
    routed: Mapping[str, UUID | None],
) -> RawResponse | KioEntity:
    """``read`` (``answer`` read) with the codes of the deleted topics among ``failed`` made
    Kafka's; ``answer`` as it came where none was deleted."""
    codes: dict[str, tuple[int, str]] = {}
    with contextlib.suppress(UpstreamError):  # not known afresh: passed on as it came
        for pause in _LOOKS:
            await asyncio.sleep(pause)
            pending = sorted(failed - codes.keys())
            await ctx.refresh_metadata(pending)
            for name in pending:
                code = _code_now(ctx, name, routed.get(name))
                if code is not None:
                    codes[name] = code
                    log.info("Produce to %s: the topic was deleted; answered %s", name, code[0])
            if codes.keys() == failed:
                break
    if not codes:
        return answer
    entity: KioEntity = dataclasses.replace(
        read, responses=tuple(_mapped(t, codes.get(t.name)) for t in read.responses)
    )
    return entity


def _read(answer: RawResponse | KioEntity) -> Any:
    """The answer as an entity; None where it cannot be read (passed on as it came)."""
    if not isinstance(answer, RawResponse):
        return answer
    try:
        return reader_for(response_type(answer.api_key, answer.api_version))(bytes(answer.body), 0)[
            0
        ]
    except Exception:
        return None


def _code_now(ctx: RelayContext, name: str, routed: UUID | None) -> tuple[int, str] | None:
    info = ctx.topic(name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _DELETED
    if routed is None or info.topic_id != routed:  # unknown when routed, or another topic now
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, _RECREATED
    replaced = info.replaced_at
    if replaced is not None and time.monotonic() - replaced < _JUST_CREATED_S:
        # routed to the topic created again, which the broker does not serve yet: Kafka's
        # broker answers NOT_LEADER_OR_FOLLOWER while it does not host the new partition
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, _RECREATED
    return None  # the same topic as before: not a deletion


def _mapped(topic: Any, code: tuple[int, str] | None) -> Any:
    if code is None:
        return topic
    changed: dict[str, Any] = {"error_code": error(code[0])}
    parts = tuple(
        dataclasses.replace(
            p, **changed, **({"error_message": code[1]} if hasattr(p, "error_message") else {})
        )
        if p.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        else p
        for p in topic.partition_responses
    )
    return dataclasses.replace(topic, partition_responses=parts)
