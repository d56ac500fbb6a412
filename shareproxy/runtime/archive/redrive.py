"""Archived records, listed and redriven: the use cases behind the REST archived resources.

A redrive copies archived records back to their source topic and partition (new offsets, the
original's key, value and headers, and headers naming where they came from), once: the archive
log marks the offsets redriven in one transaction before anything is produced, so a second call
finds them redriven and produces nothing. A produce that fails gives its offsets back; a node
that dies between the mark and the produce leaves them marked but not produced (the audit line
says what was claimed), which is the side a redrive errs on: never twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.record_preview import PREVIEW_RANGES_MAX, preview
from shareproxy.core.redrive import (
    REDRIVE_MAX_RECORDS,
    ArchivedEntry,
    ArchiveLog,
    Interval,
    Selection,
    SelectionPlan,
    redrive_headers,
)
from shareproxy.core.store import SharePartitionKey
from shareproxy.runtime.archive.record_copies import Copy, CopyError, CopyProducer, read_originals
from shareproxy.security.guard import AUDIT_LOGGER
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.lookups import topic_named

audit = logging.getLogger(AUDIT_LOGGER)
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecordPreview:
    """A record's key and value as ``core.record_preview.preview`` shows them."""

    key: str | None
    value: str | None


@dataclass(frozen=True, slots=True)
class ArchivedView:
    """One archive log range, its topic named (None: the cluster no longer has it), and its
    first record previewed (None: not asked for, or not read: gone from the log, unreadable)."""

    topic: str | None
    entry: ArchivedEntry
    first_record: RecordPreview | None = None


@dataclass(frozen=True, slots=True)
class RedriveAsk:
    """Offsets first..last of a topic-partition (None for both: all it has archived)."""

    topic: str
    partition: int
    first: int | None = None
    last: int | None = None


@dataclass(slots=True)
class RedriveOutcome:
    topic: str
    partition: int
    plan: SelectionPlan
    # each redriven range with the offsets its copies got, in order
    produced: list[tuple[Interval, list[int]]] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)  # claimed, but no longer in the log
    # a range whose produce began and did not answer: some copies may be written, so it stays
    # marked (never produced twice) and the error names it
    uncertain: Interval | None = None


RedriveResult = Literal["dry run", "redriven", "already redriven"]


def result_of(outcomes: Sequence[RedriveOutcome], dry_run: bool) -> RedriveResult:
    """What a redrive call came to: a second call of the same offsets is "already redriven"."""
    if dry_run:
        return "dry run"
    return "redriven" if any(o.plan.redrive for o in outcomes) else "already redriven"


def _text(intervals: Sequence[Interval]) -> str:
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in intervals)


class ArchivedRecords:
    def __init__(
        self,
        archive_log: ArchiveLog,
        upstream: Upstream,
        producer: CopyProducer,
        settings_for: Callable[[str], GroupSettings],
        require_group: Callable[[str], Awaitable[None]],
        clock_ms: Callable[[], int],
    ) -> None:
        self.archive_log = archive_log
        self.upstream = upstream
        self.producer = producer
        self.settings_for = settings_for
        self.require_group = require_group
        self.clock_ms = clock_ms

    async def explain_rejection(
        self, group_id: str, topic_id: UUID, partition: int, offset: int, reason: str
    ) -> bool:
        """Keep why a record was rejected (a push endpoint's status) as its archive reason."""
        key = SharePartitionKey(group_id, topic_id, partition)
        return await self.archive_log.explain_rejection(key, offset, reason)

    # ------------------------------------------------------------------ listing
    async def archived(
        self,
        group_id: str,
        topic: str | None,
        partition: int | None,
        from_offset: int,
        limit: int,
        readable: Callable[[str], bool] | None = None,
    ) -> list[ArchivedView]:
        """The group's archived ranges in topic, partition and offset order; with
        ``readable``, the first record of each range in a topic it allows is read back from
        the log, as a redrive reads it, for a preview (of the first PREVIEW_RANGES_MAX)."""
        await self.require_group(group_id)
        keys = None
        if topic is not None:
            info = await topic_named(self.upstream, topic)
            partitions = sorted(info.leaders) if partition is None else [partition]
            _require_partitions(info.name, info.leaders, partitions)
            keys = [SharePartitionKey(group_id, info.topic_id, p) for p in partitions]
        entries = await self.archive_log.archived_page(group_id, keys, from_offset, limit)
        names = self._names()
        views = [ArchivedView(names.get(e.key.topic_id), e) for e in entries]
        if readable is None:
            return views
        level = self.settings_for(group_id).isolation_level
        wanted = [i for i, v in enumerate(views) if v.topic is not None and readable(v.topic)]
        wanted = wanted[:PREVIEW_RANGES_MAX]
        firsts = await asyncio.gather(
            *(self._first_record(views[i], level) for i in wanted), return_exceptions=True
        )
        for i, first in zip(wanted, firsts, strict=True):
            if isinstance(first, RecordPreview):
                views[i] = ArchivedView(views[i].topic, views[i].entry, first)
        return views

    async def _first_record(self, view: ArchivedView, isolation_level: int) -> RecordPreview | None:
        """The range's first record, read again once if the first read failed or brought
        nothing (an upstream connection renewed, a leader moving): a preview is shown once."""
        offset = view.entry.first_offset
        topic, partition = view.topic or "", view.entry.key.partition
        for last_try in (False, True):
            try:
                read = await read_originals(
                    self.upstream, topic, partition, offset, offset, isolation_level
                )
            except UpstreamError as exc:
                log.info("archived record %s-%d@%d not read: %s", topic, partition, offset, exc)
                if last_try:
                    raise
                continue
            original = read.get(offset)
            if original is not None:
                return RecordPreview(preview(original.key), preview(original.value))
        return None

    def _names(self) -> dict[UUID, str]:
        return {info.topic_id: name for name, info in self.upstream.topics.items()}

    # ------------------------------------------------------------------ redrive
    async def redrive(
        self,
        group_id: str,
        asks: Sequence[RedriveAsk],
        *,
        dry_run: bool,
        principal: str,
        authorize: Callable[[list[str]], None],
    ) -> list[RedriveOutcome]:
        """Redrive the asked offsets (see the module); ``authorize`` gets the source topics'
        names before anything is read or marked."""
        await self.require_group(group_id)
        selections = []
        for ask in asks:
            info = await topic_named(self.upstream, ask.topic)
            _require_partitions(info.name, info.leaders, [ask.partition])
            if (ask.first is None) != (ask.last is None) or (
                ask.first is not None and ask.last is not None and not 0 <= ask.first <= ask.last
            ):
                raise ShareError(
                    ErrorCode.INVALID_REQUEST,
                    f"{ask.topic}-{ask.partition}: give both first and last offset "
                    "(0 <= first <= last), or neither for all its archived records",
                )
            key = SharePartitionKey(group_id, info.topic_id, ask.partition)
            selections.append(Selection(key, ask.first, ask.last))
        authorize(sorted({a.topic for a in asks}))
        plans = await self.archive_log.claim_redrive(selections, dry_run, REDRIVE_MAX_RECORDS)
        outcomes = [
            RedriveOutcome(a.topic, a.partition, p) for a, p in zip(asks, plans, strict=True)
        ]
        _refuse_unless_archived(outcomes)
        if not dry_run:
            await self._produce_all(group_id, outcomes, principal)
        self._audit(principal, group_id, outcomes, dry_run)
        return outcomes

    async def _produce_all(
        self, group_id: str, outcomes: list[RedriveOutcome], principal: str
    ) -> None:
        settings = self.settings_for(group_id)
        for i, o in enumerate(outcomes):
            try:
                await self._produce(group_id, o, settings)
            except Exception as exc:  # the cluster: nothing after the failure is produced
                for later in outcomes[i:]:  # what was not produced may be redriven again
                    done = {interval for interval, _ in later.produced}
                    if later.uncertain is not None:
                        done.add(later.uncertain)
                    unproduced = [iv for iv in later.plan.redrive if iv not in done]
                    await self.archive_log.release_redrive(later.plan.selection.key, unproduced)
                    later.plan.redrive = sorted(done)
                self._audit(principal, group_id, outcomes, dry_run=False, failed=str(exc))
                if not isinstance(exc, CopyError):
                    raise  # the cluster out of reach: its own answer (503)
                uncertain = (
                    ""
                    if o.uncertain is None
                    else f" (offsets {o.uncertain[0]}-{o.uncertain[1]} may be partly written and "
                    "stay marked redriven)"
                )
                raise ShareError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"redriving to {o.topic}-{o.partition} failed; what was not produced "
                    f"may be redriven again{uncertain}: {exc}",
                ) from exc

    async def _produce(self, group_id: str, o: RedriveOutcome, settings: GroupSettings) -> None:
        now = self.clock_ms()
        for first, last in o.plan.redrive:
            originals = await read_originals(
                self.upstream, o.topic, o.partition, first, last, settings.isolation_level
            )
            copies = []
            for offset in range(first, last + 1):
                original = originals.get(offset)
                if original is None:
                    o.gone.append(offset)
                    continue
                hs = redrive_headers(o.topic, o.partition, offset, group_id, now)
                copies.append(Copy(original.key, original.value, [*original.headers, *hs]))
            o.uncertain = (first, last)
            offsets = await self.producer.produce(o.topic, o.partition, copies) if copies else []
            o.uncertain = None
            o.produced.append(((first, last), offsets))

    def _audit(
        self,
        principal: str,
        group_id: str,
        outcomes: Sequence[RedriveOutcome],
        dry_run: bool,
        failed: str | None = None,
    ) -> None:
        records = "; ".join(
            f"{o.topic}-{o.partition} redrive {_text(o.plan.redrive) or '-'}"
            f" already {_text(o.plan.already) or '-'}"
            for o in outcomes
        )
        result = f"failed: {failed}" if failed else result_of(outcomes, dry_run)
        audit.info(
            "redrive by %s of group %r: %s (%s)",
            principal,
            group_id,
            records,
            result,
            extra={"principal": principal, "group": group_id, "result": result},
        )


def _require_partitions(topic: str, leaders: dict[int, int], partitions: Sequence[int]) -> None:
    for p in partitions:
        if p not in leaders:
            raise ShareError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} has no partition {p}"
            )


def _refuse_unless_archived(outcomes: Sequence[RedriveOutcome]) -> None:
    """A selection naming offsets the archive log does not hold refuses the whole request;
    so does one larger than a redrive may copy (the store marked nothing then)."""
    for o in outcomes:
        if o.plan.missing:
            raise ShareError(
                ErrorCode.INVALID_RECORD_STATE,
                f"offsets {_text(o.plan.missing)} of {o.topic}-{o.partition} are not archived "
                "in this group (nothing was redriven)",
            )
        if o.plan.empty:
            raise ShareError(
                ErrorCode.INVALID_RECORD_STATE,
                f"{o.topic}-{o.partition} has no archived records in this group",
            )
    total = sum(o.plan.records for o in outcomes)
    if total > REDRIVE_MAX_RECORDS:
        raise ShareError(
            ErrorCode.INVALID_REQUEST,
            f"{total} records to redrive; at most {REDRIVE_MAX_RECORDS} in one call",
        )
