"""A virtual clock for the middle tier: an asyncio event loop whose time moves only when every
task waits on a timer, and then jumps straight to the next one.

A lock that expires after 30 s, a back-off of minutes or a lease that lapses take no wall time:
the loop runs what is ready, and when nothing is, it moves its clock to the earliest timer. A
rule that depends on time is then tested by what the runtime does, not by how loaded the
machine is. Nothing may do real I/O or use threads on such a loop (the middle tier's store and
upstream are in memory): a wait on anything but a timer would never end, and is reported.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import math
import selectors
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec

P = ParamSpec("P")

# what the runtime's clock (epoch milliseconds) reads at the loop's time 0: 2026-01-01T00:00Z,
# so that its readings look like ones in logs and timestamps. The loop's own time starts at 0:
# seconds since 1970 as a float are too coarse (a quarter of a microsecond) to land on a timer
EPOCH_S = 1_767_225_600
# how long (real time) the loop waits for I/O when no timer is set before it calls it a hang
STUCK_AFTER_S = 10.0


class Stuck(RuntimeError):
    """Every task waits, and on no timer: the test waits for something that cannot happen."""


class _FastForward(selectors.DefaultSelector):
    """Polls without blocking; a wait the loop would spend sleeping until its next timer is
    spent by moving the virtual clock to it instead."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        self._loop.reach_due_timer()
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer: only I/O could wake the loop, and there is none
            ready = super().select(STUCK_AFTER_S)
            if not ready:
                raise Stuck(f"every task waits, and on no timer ({STUCK_AFTER_S:.0f} s real)")
            return ready
        self._loop.advance(timeout)
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """``time()`` is virtual: it moves by jumps to the next timer, or by ``advance``."""

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_FastForward(self))

    def time(self) -> float:
        return self._now

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """A positive delay ends at least one step of the clock later: on a clock that moves
        only to timers, a delay that rounds to nothing would never let time pass, and a loop
        waiting for a deadline that far off would spin."""
        if delay > 0:
            when = max(self._now + delay, math.nextafter(self._now, math.inf))
            return self.call_at(when, callback, *args, context=context)
        return super().call_later(delay, callback, *args, context=context)

    def reach_due_timer(self) -> None:
        """The loop fires timers due within its clock's resolution: move the clock to such a
        timer first, so that no timer fires before its time (a task that then reads the clock
        would find its deadline not quite reached, wait again for a moment that rounds to
        nothing, and spin)."""
        scheduled = self._scheduled  # type: ignore[attr-defined]  # the loop's timer heap
        if scheduled:
            due = scheduled[0].when()
            if self._now < due < self._now + self._clock_resolution:  # type: ignore[attr-defined]
                self._now = due

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (at least one step: a timer is always reached)."""
        self._now = max(self._now + seconds, math.nextafter(self._now, math.inf))

    def clock_ms(self) -> int:
        """The runtime's clock (epoch milliseconds) on this loop's time."""
        return EPOCH_S * 1000 + round(self._now * 1000)


def loop() -> VirtualClockLoop:
    """The running virtual-clock loop (inside a test on the virtual clock)."""
    running = asyncio.get_running_loop()
    if not isinstance(running, VirtualClockLoop):
        raise RuntimeError("not on the virtual clock: decorate the test with @virtual_clock")
    return running


def now_ms() -> int:
    """The virtual clock in epoch milliseconds."""
    return loop().clock_ms()


async def sleep_until(deadline_s: float) -> None:
    """Wait until the virtual clock reads ``deadline_s`` (loop time)."""
    await asyncio.sleep(max(0.0, deadline_s - loop().time()))


def virtual_clock(test: Callable[P, Awaitable[None]]) -> Callable[P, None]:
    """Run an ``async def`` test on a fresh ``VirtualClockLoop`` (a plain function to pytest,
    so the suite's shared event loop never sees it)."""
    if not inspect.iscoroutinefunction(test):
        raise TypeError(f"{test.__name__} must be an async def to run on the virtual clock")

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
            runner.run(test(*args, **kwargs))

    return run


def without_first_parameter(wrapper: Callable[..., Any], test: Callable[..., Any]) -> None:
    """Show pytest ``test``'s parameters bar the first, which ``wrapper`` passes itself (not a
    fixture)."""
    signature = inspect.signature(test)
    params = list(signature.parameters.values())[1:]
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
