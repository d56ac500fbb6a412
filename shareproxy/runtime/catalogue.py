"""Placement's topic catalogue as one node keeps it up: the store holds it (each upstream
topic's partition count, in entry order) and every node places from the copy its view of the
live nodes brings; each node adds what its own upstream metadata shows that the catalogue
lacks: new topics, partitions added, topics deleted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from uuid import UUID

from shareproxy.core.nodes import NodeRegistry
from shareproxy.core.store import StoreUnavailable
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line

log = logging.getLogger(__name__)

# a node's upstream topics as the catalogue takes them: each topic's partition count, and the
# ids the upstream cluster no longer has
CatalogueSource = tuple[Mapping[UUID, int], Collection[UUID]]


class Cataloguing:
    def __init__(self, registry: NodeRegistry, reread: Callable[[], Awaitable[None]]) -> None:
        """``reread``: read the live nodes again, after a change made here."""
        self.registry = registry
        self.reread = reread
        # the topics this node's upstream metadata shows (None: not wired, it adds nothing)
        self.source: Callable[[], CatalogueSource] | None = None
        self.known: dict[UUID, int] = {}  # the catalogue of the newest view
        self._asked: object = None  # the last change asked: not asked again
        self._one_at_a_time = asyncio.Lock()
        self._waited_on: asyncio.Task[None] | None = None  # what a metadata read waits on

    def lacking(self) -> bool:
        """Whether this node's metadata shows what the catalogue lacks (and was not refused)."""
        return self._change() is not None

    def _change(self) -> tuple[dict[UUID, int], list[UUID]] | None:
        """What to ask of the store: topics entered or grown, and ids deleted; None when there
        is nothing, or it is what the store refused last (a node whose metadata is older than
        another's), which is not asked again until it differs."""
        if self.source is None:
            return None
        counts, retired = self.source()
        known = self.known
        grown = {t: n for t, n in counts.items() if known.get(t, 0) < n}
        gone = sorted(t for t in retired if t in known)
        if not (grown or gone) or (sorted(grown.items()), gone) == self._asked:
            return None
        return grown, gone

    async def bring_up(self) -> None:
        """Ask the store for what the catalogue lacks."""
        async with self._one_at_a_time:
            change = self._change()
            if change is None:
                return
            grown, gone = change
            try:
                if await self.registry.catalogue(grown, gone):
                    await self.reread()
                self._asked = (sorted(grown.items()), gone)
            except StoreUnavailable as exc:  # asked again at the next renewal
                STORE_OUTAGE.failed("recording the topic catalogue", first_line(exc))
            except Exception as exc:
                log.warning("recording the topic catalogue failed: %s", exc)

    async def within(self, wait_s: float) -> None:
        """``bring_up``, waited on for ``wait_s`` at most (it goes on after that)."""
        if self._waited_on is None or self._waited_on.done():
            self._waited_on = asyncio.create_task(self.bring_up(), name="node-catalogue")
        await asyncio.wait({self._waited_on}, timeout=wait_s)

    async def stop(self) -> None:
        if self._waited_on is not None:
            self._waited_on.cancel()
            await asyncio.gather(self._waited_on, return_exceptions=True)
