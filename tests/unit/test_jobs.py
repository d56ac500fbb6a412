"""Every background job runs through ``jobs.Periodic``: its waits, its first round, its one
logging policy. On the virtual clock: each wait is exact, whatever the machine's load."""

import asyncio
import logging

from shareproxy.core.store import StoreUnavailable
from shareproxy.runtime import jobs
from shareproxy.runtime.jobs import Periodic, every
from shareproxy.telemetry.logs import STORE_OUTAGE
from tests.support.virtual_clock import virtual_clock


@virtual_clock
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
    await asyncio.sleep(0.1)  # t = 0.11: rounds at 0, 0.05 and 0.1 for early, 0.05 and 0.1 late
    assert (rounds.count("early"), rounds.count("late")) == (3, 2)
    await late.stop()
    await early.stop()
    done = len(rounds)
    await asyncio.sleep(0.08)
    assert len(rounds) == done  # stopped: no more rounds


@virtual_clock
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
        await asyncio.sleep(0)  # the job wakes
        await asyncio.sleep(0)  # and runs its round
        assert rounds == [1]
        await asyncio.sleep(0.03)
        assert rounds == [1]
    finally:
        await job.stop()
    lengths = iter([0.01, 0.02])
    started = asyncio.get_running_loop().time()
    wait = every(lambda: next(lengths))
    await wait()
    await wait()
    assert round(asyncio.get_running_loop().time() - started, 9) == 0.03


@virtual_clock
async def test_failed_rounds_are_one_warning_per_window_and_the_job_goes_on(caplog, monkeypatch):
    monkeypatch.setattr(jobs, "WARN_EVERY_S", 3.0)
    tries: list[int] = []

    async def failing() -> None:
        tries.append(1)
        raise ValueError("broken")

    job = Periodic("failing", 0.25, failing, "doing x", reads_store=False)
    with caplog.at_level(logging.WARNING, logger="shareproxy.runtime.jobs"):
        job.start()
        try:
            await asyncio.sleep(3.1)  # rounds every quarter second: 0 to 3 s
        finally:
            await job.stop()
    assert len(tries) == 13  # the job went on after each failure
    # one warning at 0, the next 3 s later, counting the eleven rounds between
    assert [r.getMessage() for r in caplog.records] == [
        "doing x failed: broken",
        "doing x failed: broken (11 more failed rounds not logged)",
    ]
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


@virtual_clock
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
    await asyncio.sleep(0.049)
    assert events == ["round"]  # still pausing: the wait comes after
    await asyncio.sleep(0.002)
    await job.stop()
    assert events[:3] == ["round", "wait", "round"]
