"""The pushes this node runs: one ``GroupPusher`` per group with a push, started, changed and
stopped as the groups' pushes change (``GroupPushes`` tells, within a second of a change made
through any node). Each group has its own HTTP connections, ``max_in_flight`` of them, so one
slow endpoint takes no connection from another group's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from shareproxy.core.push_spec import PushSpec
from shareproxy.push.push_status import PushStatus
from shareproxy.runtime.archive import ArchivedRecords
from shareproxy.runtime.consuming import ShareConsumers
from shareproxy.settings.push_targets import PushTargets
from shareproxy.telemetry.logs import first_line

if TYPE_CHECKING:
    from shareproxy.push.connections import Connections
    from shareproxy.push.group_pusher import GroupPusher

log = logging.getLogger(__name__)


class Pushers:
    def __init__(
        self,
        consumers: ShareConsumers,
        archived: ArchivedRecords,
        targets: PushTargets,
        clock_ms: Callable[[], int],
        *,
        ca_bundle: str | None = None,
    ) -> None:
        self._consumers = consumers
        self._archived = archived
        self._targets = targets
        self._clock_ms = clock_ms
        self._ca_bundle = ca_bundle
        self._running: dict[str, tuple[GroupPusher, Connections]] = {}
        self._wanted: dict[str, PushSpec] = {}
        self._changes: asyncio.Queue[None] = asyncio.Queue()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    @property
    def targets(self) -> PushTargets:
        return self._targets

    def status(self, group_id: str) -> PushStatus | None:
        """This node's part of the group's push (None: the node runs none for it)."""
        running = self._running.get(group_id)
        return None if running is None else running[0].status

    def changed(self, specs: dict[str, PushSpec]) -> None:
        """The groups' pushes as they are now (a listener of ``GroupPushes``)."""
        self._wanted = specs
        self._changes.put_nowait(None)

    def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="pushers")

    async def stop(self) -> None:
        """Stop every push once the change under way (if any) is applied: a pusher is never
        left half stopped."""
        self._stopping = True
        self._changes.put_nowait(None)
        if self._task is not None:
            await self._task
        for group_id in list(self._running):
            await self._stop(group_id)

    async def _follow(self) -> None:
        """Apply each change in turn: one owner of the running pushers."""
        while True:
            await self._changes.get()
            if self._stopping:
                return
            wanted = self._wanted
            for group_id in list(self._running):
                if wanted.get(group_id) != self._running[group_id][0].spec:
                    await self._stop(group_id)
            for group_id, spec in wanted.items():
                if group_id not in self._running:
                    try:
                        self._start(group_id, spec)
                    except Exception as exc:  # (the CA bundle is checked at start already)
                        log.warning(
                            "push cannot start", extra={"group": group_id, "why": first_line(exc)}
                        )

    def _start(self, group_id: str, spec: PushSpec) -> None:
        # the HTTP client loads with the first push, not with every node's start
        from shareproxy.push.connections import Connections
        from shareproxy.push.group_pusher import GroupPusher

        client = Connections(spec.max_in_flight, self._ca_bundle)
        pusher = GroupPusher(
            group_id, spec, self._consumers, self._archived, client, self._targets, self._clock_ms
        )
        self._running[group_id] = (pusher, client)
        pusher.start()
        log.info("pushing", extra={"group": group_id, "url": spec.url})

    async def _stop(self, group_id: str) -> None:
        pusher, client = self._running.pop(group_id)
        await pusher.stop()
        await client.aclose()
