"""Share groups' pushes (beyond KIP-932): set, shown and removed through any node, kept in the
store with the group, and known to every node within a second of a change, so that each node
pushes the share-partitions it leads. This class alone changes what the node knows of them;
the pushers listen."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import require_group_id
from shareproxy.core.push_spec import PushSpec, PushSpecError, PushStore

log = logging.getLogger(__name__)

Listener = Callable[[dict[str, PushSpec]], None]
READ_EVERY_S = 1.0


class GroupPushes:
    def __init__(self, store: PushStore, version: Callable[[], Awaitable[int]]) -> None:
        """``version``: a coroutine function giving the store's configs version, which every
        change of a push raises."""
        self._store = store
        self._version_of = version
        self._version: int | None = None
        self._specs: dict[str, PushSpec] = {}
        self._listeners: list[Listener] = []

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @property
    def specs(self) -> dict[str, PushSpec]:
        """Every group's push as this node knows it now."""
        return dict(self._specs)

    def has_push(self, group_id: str) -> bool:
        return group_id in self._specs

    async def refresh(self) -> None:
        """Read the pushes again when the store's configs version moved."""
        version = await self._version_of()
        if version == self._version:
            return
        await self._read()
        self._version = version  # only once read: a failed read is tried again

    async def _read(self) -> None:
        specs: dict[str, PushSpec] = {}
        for group_id, stored in (await self._store.pushes()).items():
            try:
                specs[group_id] = PushSpec.from_stored(stored)
            except (PushSpecError, KeyError, TypeError, ValueError) as exc:
                log.warning("a stored push cannot be read", extra={"group": group_id, "why": exc})
        if specs != self._specs:
            self._specs = specs
            for listener in self._listeners:
                listener(dict(specs))

    async def show(self, group_id: str) -> PushSpec | None:
        """The group's push as stored now (another node may have changed it a moment ago)."""
        require_group_id(group_id)
        stored = (await self._store.pushes()).get(group_id)
        if stored is None:
            return None
        try:
            return PushSpec.from_stored(stored)
        except (PushSpecError, KeyError, TypeError, ValueError) as exc:
            raise ShareError(
                ErrorCode.INVALID_CONFIG, f"the stored push cannot be read ({exc}): set it again"
            ) from None

    async def set(self, group_id: str, spec: PushSpec) -> bool:
        """Store the push and start it here; True when the group had none."""
        require_group_id(group_id)
        created = await self._store.set_push(group_id, spec.stored())
        log.info(
            "push set",
            extra={"group": group_id, "url": spec.url, "topics": list(spec.topics)},
        )
        await self._read()
        return created

    async def remove(self, group_id: str) -> bool:
        """Stop and forget the group's push; False when it had none."""
        require_group_id(group_id)
        removed = await self._store.remove_push(group_id)
        if removed:
            log.info("push removed", extra={"group": group_id})
            await self._read()
        return removed
