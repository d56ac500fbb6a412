"""The middle tier's runtime: ``build_runtime``'s wiring, as the proxy runs it, on the in-memory
store, the scripted upstream and the virtual clock. A rule of the runtime (a lock timeout, a
back-off, a long poll, group commit, a fenced leader) is then tested in milliseconds, and the
same on a loaded machine as on an idle one."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from shareproxy.core.persisted import DEFAULT_FOLD_EVERY
from tests.support import virtual_clock
from tests.support.memory_store import MemoryStore
from tests.support.runtime import Runtime
from tests.support.scripted_upstream import Record, ScriptedUpstream


class _NoRegistry:
    """The node registry of a node that never joins the live nodes: any use is a test bug."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a middle-tier node never joins: registry.{name} was used")


class MiddleRuntime(Runtime):
    """The runtime on fakes; ``cluster`` is the scripted upstream, ``store`` the memory one."""

    store: MemoryStore

    def __init__(self, fold_every: int = DEFAULT_FOLD_EVERY, **options: Any) -> None:
        """``options``: ``Runtime``'s (``coordinates``, the node's settings)."""
        loop = virtual_clock.loop()
        self.loop = loop
        self.cluster = ScriptedUpstream(loop.clock_ms)
        store = MemoryStore(
            fold_every, clock=lambda: datetime.fromtimestamp(loop.clock_ms() / 1000, UTC)
        )
        super().__init__(store, self.cluster, _NoRegistry(), clock=loop.clock_ms, **options)

    def topic(self, partitions: int = 1) -> str:
        return self.cluster.create_topic(partitions=partitions)

    def produce(
        self, topic: str, records: int | Sequence[Record], partition: int = 0
    ) -> tuple[int, int]:
        return self.cluster.produce(topic, records, partition)

    def now(self) -> float:
        """The virtual clock, in seconds of loop time to the microsecond (a sum of float waits
        is a few ulps off the exact one)."""
        return round(self.loop.time(), 6)


@contextlib.asynccontextmanager
async def middle_runtime(
    fold_every: int = DEFAULT_FOLD_EVERY, **options: Any
) -> AsyncIterator[MiddleRuntime]:
    """A started ``MiddleRuntime``, stopped at the end (inside a ``@virtual_clock`` test)."""
    rt = await MiddleRuntime(fold_every, **options).start()
    try:
        yield rt
    finally:
        await rt.stop()


def on_middle_runtime(
    test: Callable[..., Awaitable[None]] | None = None,
    *,
    fold_every: int = DEFAULT_FOLD_EVERY,
    **options: Any,
) -> Any:
    """Run an ``async def test(runtime, …)`` on the virtual clock with a started
    ``MiddleRuntime`` as its first argument (the others are pytest's fixtures); ``options``
    as ``MiddleRuntime`` takes them."""

    def decorate(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
        @functools.wraps(test)
        async def with_runtime(*args: Any, **kwargs: Any) -> None:
            async with middle_runtime(fold_every, **options) as rt:
                await test(rt, *args, **kwargs)

        virtual_clock.without_first_parameter(with_runtime, test)
        run = virtual_clock.virtual_clock(with_runtime)
        virtual_clock.without_first_parameter(run, test)
        return run

    return decorate if test is None else decorate(test)
