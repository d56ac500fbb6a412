"""Every background job runs through ``jobs.Periodic``: its waits, its first round, its one
logging policy."""

import asyncio
import logging

from shareproxy import jobs
from shareproxy.core.store import StoreUnavailable
from shareproxy.jobs import Periodic, every
from shareproxy.logs import STORE_OUTAGE


async def _until(check, what: str) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(what)


async def test_a_job_waits_first_unless_at_once_and_stops():
    rounds: list[str] = []

    async def once(name: str) -> None:
        rounds.append(name)

    late = Periodic("late", 0.05, lambda: once("late"), "x", at_once=False)
    early = Periodic("early", 0.05, lambda: once("early"), "x")
    late.start()
    early.start()
    await asyncio.sleep(0.01)
    assert rounds == ["early"]
    await _until(lambda: rounds.count("late") >= 2, "the late job's rounds")
    await late.stop()
    await early.stop()
    done = len(rounds)
    await asyncio.sleep(0.08)
    assert len(rounds) == done  # stopped: no more rounds


async def test_a_wait_may_be_an_event_or_an_interval_read_afresh():
    wakeup = asyncio.Event()
    rounds: list[int] = []

    async def next_wakeup() -> None:
        await wakeup.wait()
        wakeup.clear()

    async def count() -> None:
        rounds.append(1)

    job = Periodic("on-event", next_wakeup, count, "x", at_once=False)
    job.start()
    try:
        await asyncio.sleep(0.03)
        assert rounds == []
        wakeup.set()
        await _until(lambda: rounds == [1], "a round per wakeup")
        await asyncio.sleep(0.03)
        assert rounds == [1]
    finally:
        await job.stop()
    lengths = iter([0.01, 0.02])
    started = asyncio.get_running_loop().time()
    wait = every(lambda: next(lengths))
    await wait()
    await wait()
    assert asyncio.get_running_loop().time() - started >= 0.03


async def test_failed_rounds_are_one_warning_per_window_and_the_job_goes_on(caplog, monkeypatch):
    monkeypatch.setattr(jobs, "WARN_EVERY_S", 0.06)
    tries: list[int] = []

    async def failing() -> None:
        tries.append(1)
        raise ValueError("broken")

    job = Periodic("failing", 0.005, failing, "doing x", reads_store=False)
    with caplog.at_level(logging.WARNING, logger="shareproxy.jobs"):
        job.start()
        try:
            await _until(lambda: len(tries) >= 4, "rounds after a failure")
            await asyncio.sleep(0.07)
            await _until(lambda: len(caplog.records) >= 2, "the next window's warning")
        finally:
            await job.stop()
    first, second = (r.getMessage() for r in caplog.records[:2])
    assert first == "doing x failed: broken"
    assert second.startswith("doing x failed: broken (") and "not logged" in second
    assert not any(r.exc_info for r in caplog.records)  # a traceback only at debug


async def test_a_store_outage_is_the_store_outage_and_a_round_reading_the_store_ends_it(
    caplog,
):
    down = [True]

    async def reading() -> None:
        if down[0]:
            raise StoreUnavailable("connection refused")

    job = Periodic("reading", 0.005, reading, "reading the store")
    with caplog.at_level(logging.INFO, logger="shareproxy.store"):
        assert await job.run_once() is False
        assert await job.run_once() is False
        assert STORE_OUTAGE.down
        down[0] = False
        assert await job.run_once() is True
        assert not STORE_OUTAGE.down
    levels = [r.levelname for r in caplog.records if r.name == "shareproxy.store"]
    assert levels == ["WARNING", "INFO"]


async def test_a_round_not_reading_the_store_does_not_end_its_outage():
    async def nothing() -> None:
        return None

    STORE_OUTAGE.failed("a test", "connection refused")
    try:
        assert await Periodic("quiet", 1, nothing, "x", reads_store=False).run_once()
        assert STORE_OUTAGE.down
    finally:
        STORE_OUTAGE.answered()


async def test_a_failed_round_pauses_before_the_next_wait():
    events: list[str] = []

    async def failing() -> None:
        events.append("round")
        raise ValueError("no")

    async def wait() -> None:
        events.append("wait")
        await asyncio.sleep(0)

    job = Periodic("pausing", wait, failing, "x", after_failure_s=0.05)
    job.start()
    await asyncio.sleep(0.02)
    await job.stop()
    assert events == ["round"]  # still pausing: the wait comes after
