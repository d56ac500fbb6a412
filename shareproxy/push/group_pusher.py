"""One share group's push on one node: acquire records from the share-partitions of its topics
this node leads, POST each to the endpoint, and acknowledge it by the answer.

At least once, exactly as acknowledged: a record is acquired before it is POSTed and accepted
only once its 2xx arrived; a record whose push is cut short (the node stops, the push changes)
is released, and comes back. A request's time-out ends before the record's acquisition lock
does (``PushSpec.timeout_within``), so while its share-partition stays on this node no record is
pushed twice at once: a slow endpoint sees a time-out, never a second copy while it still works
on the first. (A share-partition that moves to another node is pushed from there at once: the
old node's pushes under way may overlap the new node's for up to their time-out.)

Bounded: no more records are acquired than requests may start now (``max_in_flight``, one
probe while the endpoint is down), so nothing waits in memory; a failing endpoint pauses the
acquiring (``EndpointPacing``), so its records stay in the log, available to other consumers
of the group, and cost no busy loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.push_outcome import PushAnswer, PushOutcome, judge, rejection_reason
from shareproxy.core.push_pacing import EndpointChange, EndpointPacing
from shareproxy.core.push_spec import LOCK_MARGIN_MS, PUSH_MEMBER_ID, PushSpec
from shareproxy.core.states import AcknowledgeType, AcquireMode
from shareproxy.core.store import StoreUnavailable
from shareproxy.push.cloudevent import PushedRecord, http_headers
from shareproxy.push.connections import NO_ANSWER, Connections
from shareproxy.push.push_status import PushedAnswer, PushStatus
from shareproxy.runtime.archive import ArchivedRecords
from shareproxy.runtime.consuming import (
    FetchLimits,
    NamedTopic,
    ShareConsumers,
    TopicPartition,
    records_in,
)
from shareproxy.settings.push_targets import PushTargetError, PushTargets
from shareproxy.telemetry import metrics
from shareproxy.telemetry.logs import first_line
from shareproxy.upstream.client import UpstreamError

log = logging.getLogger(__name__)

FETCH_WAIT_MS = 500  # the long poll for records while the endpoint could take more
FETCH_MAX_BYTES = 16 * 1024 * 1024
TOPICS_FRESH_MS = 10_000  # how long the topics' partitions are taken as known
PROBLEM_RETRY_S = 2.0  # how soon a push that cannot go on (a topic missing, …) tries again
GAP = 0  # ShareAcknowledge's type for an acquired offset that holds no record


@dataclass(frozen=True, slots=True)
class _Held:
    """An acquired record waiting for the endpoint's pace to allow its push."""

    tp: TopicPartition
    record: PushedRecord
    lock_ends_ms: int


@dataclass(frozen=True, slots=True)
class _Led:
    """A share-partition the push reads: its topic's name, for the events."""

    tp: TopicPartition
    topic: str


class GroupPusher:
    """Owned by ``Pushers``, which starts and stops it; its status is read by the REST API."""

    def __init__(
        self,
        group_id: str,
        spec: PushSpec,
        consumers: ShareConsumers,
        archived: ArchivedRecords,
        connections: Connections,
        targets: PushTargets,
        clock_ms: Callable[[], int],
    ) -> None:
        self.group_id = group_id
        self.spec = spec
        self.status = PushStatus()
        self._consumers = consumers
        self._archived = archived
        self._connections = connections
        self._targets = targets
        self._clock_ms = clock_ms
        self._pacing = EndpointPacing()
        self._pushes: set[asyncio.Task[None]] = set()
        # acquired by the last fetch, not pushed yet: at most the room that fetch asked for
        self._held: deque[_Held] = deque()
        self._topics: list[NamedTopic] = []
        self._topics_read_at: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # a push ended: there may be room for another

    def start(self) -> None:
        self._task = asyncio.create_task(self._forever(), name=f"push-{self.group_id}")

    async def stop(self) -> None:
        """Stop acquiring, cut the pushes under way short and release what they hold."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # (a cancel of the caller itself still propagates)
        for push in list(self._pushes):
            push.cancel()
        await asyncio.gather(*self._pushes, return_exceptions=True)
        try:
            await self._consumers.release(self.group_id, PUSH_MEMBER_ID)
        except (ShareError, UpstreamError, StoreUnavailable):  # their locks end by time instead
            log.info("a stopped push's records wait for their locks to end")
        metrics.PUSH_ENDPOINT_DOWN.labels(self.group_id).set(0)

    async def _forever(self) -> None:
        while True:
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store, the cluster, a topic gone: tried again
                self._problem(f"cannot acquire: {first_line(exc)}")
                await asyncio.sleep(PROBLEM_RETRY_S)

    def _problem(self, problem: str | None) -> None:
        if problem != self.status.problem and problem is not None:
            log.warning("push cannot go on", extra={"group": self.group_id, "why": problem})
        elif problem is None and self.status.problem is not None:
            log.info("push goes on", extra={"group": self.group_id})
        self.status.problem = problem

    async def _round(self) -> None:
        now = self._clock_ms()
        room = self._pacing.in_flight_allowed(self.spec.max_in_flight) - len(self._pushes)
        if self._held:
            await self._send_held(now, room)
            return
        if room <= 0 or not self._pacing.may_push(now):
            await self._wait_for_room(self._pacing.paused_until_ms - now)
            return
        try:
            self._targets.check(self.spec.url)  # the node's setting may have changed since
        except PushTargetError as exc:
            self._problem(str(exc))
            await asyncio.sleep(PROBLEM_RETRY_S)
            return
        led = await self._led(now)
        self._problem(None)
        if not led:
            await asyncio.sleep(FETCH_WAIT_MS / 1000)
            return
        names = {x.tp: x.topic for x in led}
        lock_ends_ms = self._consumers.lock_expiry_ms(self.group_id)  # before: the earliest
        limits = FetchLimits(
            max_wait_ms=FETCH_WAIT_MS,
            max_records=room,
            max_bytes=FETCH_MAX_BYTES,
            mode=AcquireMode.RECORD_LIMIT,
        )
        acquired = await self._consumers.fetch(
            self.group_id, PUSH_MEMBER_ID, names, limits, group_stored=True
        )
        left: dict[TopicPartition, list[AckBatch]] = {}
        for tp, acquisition in acquired.items():
            pushed: set[int] = set()
            try:
                for rec in records_in(acquisition):
                    pushed.add(rec.offset)
                    record = PushedRecord(
                        self.group_id,
                        names[tp],
                        tp[1],
                        rec.offset,
                        rec.timestamp_ms,
                        rec.key,
                        rec.value,
                        rec.headers,
                        rec.delivery_count,
                    )
                    self._held.append(_Held(tp, record, lock_ends_ms))
                kind = GAP  # control records and compacted-away offsets: nothing to push
            except Exception as exc:  # batches that cannot be read: released, not held
                self._problem(f"cannot read records of {names[tp]}-{tp[1]}: {first_line(exc)}")
                kind = int(AcknowledgeType.RELEASE)
            missing = [
                o
                for r in acquisition.acquired
                for o in range(r.first_offset, r.last_offset + 1)
                if o not in pushed
            ]
            if missing:
                left[tp] = [AckBatch(o, o, (kind,)) for o in missing]
        if left:
            await self._consumers.acknowledge(self.group_id, PUSH_MEMBER_ID, left)

    async def _send_held(self, now: int, room: int) -> None:
        """Push what the last fetch acquired, as the endpoint's pace allows: the endpoint may
        have failed, or asked to be left alone (Retry-After), while the fetch waited. A record
        whose lock would end before it may be pushed is released instead (it comes back)."""
        late = [h for h in self._held if self.spec.timeout_within(h.lock_ends_ms - now) <= 0]
        if late:
            self._held = deque(h for h in self._held if h not in late)
            released = int(AcknowledgeType.RELEASE)
            acks: dict[TopicPartition, list[AckBatch]] = {}
            for h in late:
                acks.setdefault(h.tp, []).append(
                    AckBatch(h.record.offset, h.record.offset, (released,))
                )
            await self._consumers.acknowledge(self.group_id, PUSH_MEMBER_ID, acks)
        if room > 0 and self._pacing.may_push(now):
            for _ in range(min(room, len(self._held))):
                h = self._held.popleft()
                self._start(h.tp, h.record, h.lock_ends_ms)
            return
        if self._held:
            first_lock = min(h.lock_ends_ms for h in self._held) - LOCK_MARGIN_MS
            await self._wait_for_room(min(self._pacing.paused_until_ms, first_lock) - now)

    async def _wait_for_room(self, paused_ms: int) -> None:
        self._changed.clear()
        timeout = paused_ms / 1000 if paused_ms > 0 else None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def _led(self, now: int) -> list[_Led]:
        """The share-partitions of the push's topics (read again every ``TOPICS_FRESH_MS``,
        so that added partitions are pushed too); the fetch keeps to those led here."""
        if self._topics_read_at is None or now - self._topics_read_at >= TOPICS_FRESH_MS:
            self._topics = await self._consumers.named(self.spec.topics)
            self._topics_read_at = now
        return [_Led((t.topic_id, p), t.name) for t in self._topics for p in t.partitions]

    def _start(self, tp: TopicPartition, record: PushedRecord, lock_ends_ms: int) -> None:
        task = asyncio.create_task(self._push(tp, record, lock_ends_ms))
        self._pushes.add(task)
        self.status.in_flight = len(self._pushes)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._pushes.discard(task)
        self.status.in_flight = len(self._pushes)
        self._changed.set()

    async def _push(self, tp: TopicPartition, record: PushedRecord, lock_ends_ms: int) -> None:
        started = self._clock_ms()
        timeout_ms = self.spec.timeout_within(lock_ends_ms - started)
        answer = await self._post(record, timeout_ms) if timeout_ms > 0 else judge(None, None, 0)
        ended = self._clock_ms()
        self._answered(record, answer, started, ended)
        ack = AckBatch(record.offset, record.offset, (int(answer.outcome.acknowledge_type),))
        try:
            acks = {tp: [ack]}
            code = (await self._consumers.acknowledge(self.group_id, PUSH_MEMBER_ID, acks))[tp]
        except (ShareError, UpstreamError, StoreUnavailable) as exc:
            code, why = -1, first_line(exc)
        else:
            why = ""
        if code != ErrorCode.NONE:  # the lock ended, the share-partition moved, the store is
            # down: the record's lock ends and it is pushed again
            log.debug("a push's acknowledgement was refused", extra={"code": code, "why": why})
        elif answer.outcome is PushOutcome.REJECTED and answer.status is not None:
            await self._explain(tp, record.offset, rejection_reason(answer.status))

    async def _explain(self, tp: TopicPartition, offset: int, reason: str) -> None:
        """Keep the endpoint's status as the rejection's reason; a store out of reach leaves
        it "rejected", which the record was."""
        try:
            await self._archived.explain_rejection(self.group_id, tp[0], tp[1], offset, reason)
        except StoreUnavailable as exc:
            log.debug("a rejection's reason was not kept", extra={"why": first_line(exc)})

    async def _post(self, record: PushedRecord, timeout_ms: int) -> PushAnswer:
        try:
            headers = http_headers(record)
            if self.spec.authorization:
                headers.append(("authorization", self.spec.authorization))
            answered = await self._connections.post(
                self.spec.url, headers, record.value or b"", timeout_ms / 1000
            )
        except NO_ANSWER:  # time-out, refused, reset, a broken answer: no verdict
            return judge(None, None, self._clock_ms())
        except Exception as exc:  # a request that could not be made here: no verdict either
            self._problem(f"a push could not be sent: {first_line(exc)}")
            return judge(None, None, self._clock_ms())
        return judge(answered.status, answered.retry_after, self._clock_ms())

    def _answered(self, record: PushedRecord, answer: PushAnswer, started: int, ended: int) -> None:
        outcome: PushOutcome = answer.outcome
        metrics.PUSHED.labels(self.group_id, outcome.value).inc()
        if answer.status is not None:
            metrics.PUSH_SECONDS.labels(self.group_id).observe((ended - started) / 1000)
        self.status.answered(
            PushedAnswer(
                ended,
                record.topic,
                record.partition,
                record.offset,
                record.delivery_count,
                answer.status,
                outcome,
                ended - started,
            ),
            answer,
        )
        change = self._pacing.answered(answer, ended, started)
        self.status.down_since_ms = self._pacing.down_since_ms
        if change is EndpointChange.DOWN:
            metrics.PUSH_ENDPOINT_DOWN.labels(self.group_id).set(1)
            log.warning(
                "push endpoint failing: pushes back off",
                extra={"group": self.group_id, "status": answer.status},
            )
        elif change is EndpointChange.UP:
            metrics.PUSH_ENDPOINT_DOWN.labels(self.group_id).set(0)
            log.info("push endpoint answers again", extra={"group": self.group_id})
