"""Every background job of the proxy (lock expiry, lease renewal, reloads, counts, polls): one
round repeated for the proxy's life, one task per job, one logging policy.

A failed round is logged and the next one tries again, since the store or the cluster may be
back by then: a store that cannot be reached is one warning per outage (STORE_OUTAGE), any other
failure a warning at most once per ``WARN_EVERY_S`` per job, saying how many were left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from shareproxy.core.store import StoreUnavailable
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line

log = logging.getLogger(__name__)

# the most often one job warns of failed rounds (a lock sweep runs 20 times a second)
WARN_EVERY_S = 10.0

Wait = Callable[[], Awaitable[object]]


def every(seconds: float | Callable[[], float]) -> Wait:
    """A wait of a fixed interval, or of one read afresh before each wait."""
    length = seconds if callable(seconds) else lambda: seconds
    return lambda: asyncio.sleep(length())


class Periodic:
    """A job: ``round_`` again and again, ``wait`` between two rounds.

    ``wait`` is seconds, or a coroutine to await (an event, an interval that changes);
    ``at_once`` runs the first round before the first wait. ``reads_store``: a round that
    succeeds proves the store answers, and so ends an outage under way. ``after_failure_s``
    pauses after a failed round, before the wait, where the wait may return at once."""

    def __init__(
        self,
        name: str,
        wait: float | Wait,
        round_: Callable[[], Awaitable[object]],
        what: str,
        *,
        at_once: bool = True,
        reads_store: bool = True,
        after_failure_s: float = 0.0,
    ) -> None:
        self.name = name
        self.wait: Wait = every(wait) if isinstance(wait, int | float) else wait
        self.round = round_
        self.what = what  # for the warning: "counting stored groups", …
        self.at_once = at_once
        self.reads_store = reads_store
        self.after_failure_s = after_failure_s
        self._task: asyncio.Task[None] | None = None
        self._warned_at: float | None = None
        self._left_out = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._forever(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _forever(self) -> None:
        if not self.at_once:
            await self.wait()
        while True:
            if not await self.run_once() and self.after_failure_s:
                await asyncio.sleep(self.after_failure_s)
            await self.wait()

    async def run_once(self) -> bool:
        """One round, its failure logged by the policy; whether it succeeded."""
        try:
            await self.round()
        except StoreUnavailable as exc:
            STORE_OUTAGE.failed(self.what, first_line(exc))
        except Exception as exc:
            self._warn(exc)
        else:
            if self.reads_store:
                STORE_OUTAGE.answered()
            return True
        return False

    def _warn(self, exc: Exception) -> None:
        """A warning without a traceback (an outage of the cluster fails every round the same
        way); the traceback goes to the debug log, for a defect."""
        log.debug("%s failed", self.what, exc_info=exc)
        now = asyncio.get_running_loop().time()
        if self._warned_at is not None and now - self._warned_at < WARN_EVERY_S:
            self._left_out += 1
            return
        left_out, self._warned_at, self._left_out = self._left_out, now, 0
        more = f" ({left_out} more failed rounds not logged)" if left_out else ""
        log.warning("%s failed: %s%s", self.what, str(exc) or type(exc).__name__, more)
