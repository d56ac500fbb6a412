"""Carry out the repairs that the drift rules name, through the store's own write path.

Every repair is fenced so a running proxy is never corrupted: an advance claims the
share-partition first (a new state epoch: the proxy's next write is refused, and its periodic
epoch check reloads the repaired state within seconds), a reset bumps the epoch the same way,
a delete happens only if the state epoch is still the one the job read (else a proxy is using
it: skipped), an initialisation only if no state exists yet, and a group is deleted only if it
is still empty since the same moment.
Each repair re-checks its drift on the state it holds, since the job read the store earlier.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from shareproxy.core.drift import Finding, Repair, expired
from shareproxy.core.errors import ErrorCode
from shareproxy.core.expiry import facts_of
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.store import GroupMembership, PartitionWrite, SharePartitionKey
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore


@dataclass(frozen=True, slots=True)
class Outcome:
    finding: Finding
    applied: bool
    detail: str


async def apply(
    state_url: str, findings: list[Finding], retention_ms: int | None = None
) -> list[Outcome]:
    """``retention_ms``: the one the findings were judged by; an expired group is judged
    again on the membership read here, since a member may have come and gone meanwhile."""
    engine = create_engine(state_url)
    try:
        store = SqlShareStateStore(engine)
        memberships = {m.group_id: m for m in await store.memberships()}
        return [
            await _repair(store, f, memberships, retention_ms)
            for f in findings
            if f.repair != Repair.NONE
        ]
    finally:
        await engine.dispose()


def _still_expired(m: GroupMembership | None, retention_ms: int | None) -> bool:
    if m is None or m.empty_since is None:
        return False
    if retention_ms is None:  # judged elsewhere: an empty group is enough
        return True
    return expired(facts_of(m), now_ms(), retention_ms)


async def _repair(
    store: SqlShareStateStore,
    f: Finding,
    memberships: dict[str, GroupMembership],
    retention_ms: int | None,
) -> Outcome:
    if f.repair == Repair.DELETE_GROUP:
        # judged again on the membership read now, and deleted only if the group is still
        # empty since that moment (no member joined through any proxy in between)
        m = memberships.get(f.group_id)
        if not _still_expired(m, retention_ms):
            return Outcome(f, False, "skipped: the group has had members since")
        assert m is not None and m.empty_since is not None
        if not await store.delete_group(f.group_id, m.empty_since):
            return Outcome(f, False, "skipped: the group has members again")
        return Outcome(f, True, "group, configs and state deleted")
    assert f.topic_id is not None and f.partition is not None
    key = SharePartitionKey(f.group_id, f.topic_id, f.partition)
    if f.repair == Repair.DELETE_STATE:
        assert f.state_epoch is not None
        if await store.delete_at_epoch(key, f.state_epoch):
            return Outcome(f, True, "state deleted")
        return Outcome(f, False, "skipped: the state changed since it was read (in use)")
    if f.repair == Repair.INITIALIZE_AT_LOG_START:
        assert f.log_start is not None
        before = await store.read(key)
        if before is not None:
            return Outcome(
                f, False, f"skipped: initialized meanwhile at {before.state.start_offset}"
            )
        if await store.initialize(key, f.log_start, f.topic) is None:
            return Outcome(f, False, "skipped: the group was deleted meanwhile")
        return Outcome(f, True, f"initialized at the log start {f.log_start}")
    if f.repair == Repair.RESET_TO_HIGH_WATERMARK:
        assert f.high_watermark is not None
        current = await store.read(key)
        if current is None or current.state.start_offset <= f.high_watermark:
            return Outcome(f, False, "skipped: no longer beyond the high watermark")
        await store.reset(key, f.high_watermark, f.topic)
        return Outcome(f, True, f"reset to the high watermark {f.high_watermark}")
    assert f.repair == Repair.ADVANCE_TO_LOG_START and f.log_start is not None
    claimed = await store.claim(key)  # fences a proxy that has it loaded
    if claimed is None:
        return Outcome(f, False, "skipped: the state is gone")
    sp = SharePartition.from_persisted(claimed.state)
    if sp.spso >= f.log_start:
        return Outcome(f, False, "skipped: already at or past the log start")
    delta = sp.update_log_start_offset(f.log_start)
    result = await store.write([PartitionWrite(key, claimed.state_epoch, delta)])
    if result[key] != ErrorCode.NONE:
        return Outcome(f, False, f"skipped: the write was refused ({result[key].name})")
    return Outcome(f, True, f"SPSO advanced to the log start {sp.spso}; {f.records} records lost")


def now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)
