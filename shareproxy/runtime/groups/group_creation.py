"""Who may make a share group, and the answers of a heartbeat for a group this node does not
hold: only a join creates one (as Kafka's coordinator), within ``group.share.max.groups``, and
only under an id no group of another type has."""

from __future__ import annotations

import asyncio

from shareproxy.core.share_group import JOIN_EPOCH, HeartbeatError, HeartbeatResult
from shareproxy.core.store import ShareStateStore
from shareproxy.upstream.client import Upstream, UpstreamError


def not_coordinator(group_id: str, member_epoch: int) -> HeartbeatResult:
    return HeartbeatResult(
        HeartbeatError.NOT_COORDINATOR,
        member_epoch,
        None,
        f"another proxy node coordinates share group {group_id!r}: find it again",
    )


async def not_held(store: ShareStateStore, group_id: str, member_epoch: int) -> HeartbeatResult:
    """A leave or a heartbeat past the join for a group this node holds no members of: nothing
    is created, and no deleted group comes back. A group the store has was coordinated
    elsewhere, or before a restart: its member is unknown here and rejoins with epoch 0, as
    KIP-932 prescribes."""
    if await store.get_group(group_id) is None:
        return HeartbeatResult(
            HeartbeatError.GROUP_ID_NOT_FOUND,
            member_epoch,
            None,
            f"share group {group_id!r} does not exist",
        )
    return HeartbeatResult(HeartbeatError.UNKNOWN_MEMBER_ID, member_epoch, None, "unknown member")


async def refused_creation(
    store: ShareStateStore,
    upstream: Upstream,
    max_groups: int | None,
    group_id: str,
    member_epoch: int,
) -> HeartbeatResult | None:
    """Why a join may not create the group, or None (also when the store already has it: a
    stored group may always be joined)."""
    if await store.get_group(group_id) is not None:
        return None
    if max_groups is not None:
        # groups created at the same moment may each see room for one: they can pass the cap
        count = len(await store.list_groups())
        if count >= max_groups:
            return HeartbeatResult(
                HeartbeatError.GROUP_MAX_SIZE_REACHED,
                member_epoch,
                None,
                f"the proxy already has {count} share groups (group.share.max.groups "
                f"{max_groups}); delete one or raise the limit",
            )
    # one namespace for every type of group, as in Kafka's coordinator: an id the upstream
    # cluster holds for a consumer group is refused as GroupMetadataManager refuses a group of
    # another type
    try:
        taken = group_id in await upstream.group_ids()
    except UpstreamError as exc:
        return HeartbeatResult(
            HeartbeatError.COORDINATOR_NOT_AVAILABLE,
            member_epoch,
            None,
            f"cannot tell whether the upstream cluster holds a group {group_id!r}: {exc}",
        )
    if taken:
        return HeartbeatResult(
            HeartbeatError.GROUP_ID_NOT_FOUND,
            member_epoch,
            None,
            f"Group {group_id} is not a share group.",
        )
    return None


class GroupCreation:
    """The check of a join that would create a group, asked once for the members joining it
    together: they go on together, so their topic lookups are shared too."""

    def __init__(self, store: ShareStateStore, upstream: Upstream, max_groups: int | None) -> None:
        self.store, self.upstream, self.max_groups = store, upstream, max_groups
        self._pending: dict[str, asyncio.Future[HeartbeatResult | None]] = {}

    async def refused(self, group_id: str) -> HeartbeatResult | None:
        pending = self._pending.get(group_id)
        if pending is None:
            pending = asyncio.ensure_future(
                refused_creation(self.store, self.upstream, self.max_groups, group_id, JOIN_EPOCH)
            )
            self._pending[group_id] = pending

            def done(check: asyncio.Future[HeartbeatResult | None]) -> None:
                self._pending.pop(group_id, None)
                if not check.cancelled():
                    check.exception()  # each waiter raises it; none is left unretrieved

            pending.add_done_callback(done)
        return await asyncio.shield(pending)
