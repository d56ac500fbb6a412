"""Which group ids are the proxy's share groups, as the consumer-group APIs need to know on
every request.

Kafka's group coordinator holds every type of group in one namespace, so a JoinGroup or an
OffsetCommit naming a share group is answered there as a group of the wrong type. The proxy
relays those APIs to the upstream cluster, which has never seen its share groups: each relayed
request first asks whether its group id is one of them. A classic consumer commits offsets and
heartbeats every few seconds, so the answer is kept for ``REMEMBERED_MS``: a share group
created on another node in that time is seen as one a little later (the groups this node
coordinates are known at once, and a deletion here forgets at once).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container

from shareproxy.core.store import StoreUnavailable
from shareproxy.telemetry.logs import RateLimit

log = logging.getLogger(__name__)
log.addFilter(RateLimit())

REMEMBERED_MS = 5_000
# answers kept at most: past it, those past their time go first, then the oldest
_MOST = 10_000


class ShareGroupIds:
    def __init__(
        self,
        live: Container[str],
        stored: Callable[[str], Awaitable[bool]],
        clock_ms: Callable[[], int],
    ) -> None:
        self._live = live  # the groups this node coordinates now
        self._stored = stored  # whether the store holds a group
        self._clock_ms = clock_ms
        self._known: dict[str, tuple[bool, int]] = {}  # group id -> (share group?, until)

    async def contains(self, group_id: str) -> bool:
        """Whether ``group_id`` is a share group. With the store unreachable the last answer
        stands, or no: the consumer groups of a cluster the proxy fronts keep working while
        the proxy's own store is down."""
        if group_id in self._live:
            return True
        now = self._clock_ms()
        known = self._known.get(group_id)
        if known is not None and known[1] > now:
            return known[0]
        try:
            found = await self._stored(group_id)
        except StoreUnavailable as exc:
            log.warning("cannot tell whether %r is a share group: %s", group_id, exc)
            return known[0] if known is not None else False
        self._remember(group_id, found, now)
        return found

    def forget(self, group_id: str) -> None:
        """The group was deleted (or created) here: the next request asks again."""
        self._known.pop(group_id, None)

    def _remember(self, group_id: str, found: bool, now: int) -> None:
        if len(self._known) >= _MOST:
            self._known = {g: k for g, k in self._known.items() if k[1] > now}
            while len(self._known) >= _MOST:
                del self._known[next(iter(self._known))]
        self._known[group_id] = (found, now + REMEMBERED_MS)
