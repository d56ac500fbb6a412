"""A stop while the store's schema is migrated (in a thread, which cannot be cancelled) waits for
the migration to end: nothing it does comes after the proxy said it stopped."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

from shareproxy.node.proxy import _to_the_end


async def test_a_stop_waits_for_the_thread_to_end() -> None:
    events: list[str] = []
    begun = threading.Event()

    def migrate() -> None:
        begun.set()
        time.sleep(0.3)
        events.append("migrated")

    starting = asyncio.ensure_future(_to_the_end(asyncio.to_thread(migrate)))
    await asyncio.to_thread(begun.wait)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    events.append("stopped")
    assert events == ["migrated", "stopped"]


async def test_a_migration_that_fails_during_a_stop_is_left_to_the_next_start() -> None:
    begun = threading.Event()

    def migrate() -> None:
        begun.set()
        time.sleep(0.1)
        raise RuntimeError("the store went away")

    loop = asyncio.get_running_loop()
    unretrieved: list[object] = []
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    starting = asyncio.ensure_future(_to_the_end(asyncio.to_thread(migrate)))
    await asyncio.to_thread(begun.wait)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    del starting
    gc.collect()
    assert unretrieved == []  # no "exception was never retrieved" in the log


async def test_an_undisturbed_migration_is_awaited_as_it_is() -> None:
    def migrate() -> None:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        await _to_the_end(asyncio.to_thread(migrate))
