"""A background round repeated for the proxy's life (counting, expiring): one failed round is
logged and the next one tries again, since the store or the cluster may be back by then. Every
round reads the store, so a store that is down is one warning per outage (STORE_OUTAGE), and
a round that succeeds ends it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from shareproxy.core.store import StoreUnavailable
from shareproxy.exits import first_line
from shareproxy.logs import STORE_OUTAGE

log = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self, name: str, every_s: float, round_: Callable[[], Awaitable[object]], what: str
    ) -> None:
        self.name = name
        self.every_s = every_s
        self.round = round_
        self.what = what  # for the warning: "counting stored groups", …
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._forever(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _forever(self) -> None:
        while True:
            try:
                await self.round()
            except StoreUnavailable as exc:
                STORE_OUTAGE.failed(self.what, first_line(exc))
            except Exception as exc:
                log.warning("%s failed: %s", self.what, exc)
            else:
                STORE_OUTAGE.answered()
            await asyncio.sleep(self.every_s)
