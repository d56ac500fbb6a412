"""Metadata lookups that arrive together share requests, each answered by one sent after it
asked: a burst of joining members costs the cluster two requests, and none of them reads
metadata older than its own ask."""

from __future__ import annotations

import asyncio

import pytest

from shareproxy.upstream.shared_reads import SharedReads


class Cluster:
    """Answers Metadata requests one at a time, when the test lets it."""

    def __init__(self) -> None:
        self.requests: list[list[str] | None] = []
        self.answer = asyncio.Event()
        self.failure: Exception | None = None

    async def read(self, topics: list[str] | None) -> None:
        self.requests.append(topics)
        await self.answer.wait()
        self.answer.clear()
        if self.failure is not None:
            raise self.failure


async def answered(cluster: Cluster, tasks: list[asyncio.Task[None]]) -> None:
    while not all(t.done() for t in tasks):
        cluster.answer.set()
        await asyncio.sleep(0)


async def test_asks_made_while_a_request_is_out_share_the_next_one() -> None:
    cluster = Cluster()
    reads = SharedReads(cluster.read)
    first = asyncio.create_task(reads.read(["a"]))
    await asyncio.sleep(0)
    later = [asyncio.create_task(reads.read([name])) for name in ("b", "c", "b", "a")]
    await asyncio.sleep(0)
    await answered(cluster, [first, *later])
    assert cluster.requests == [["a"], ["a", "b", "c"]]


async def test_an_ask_is_never_answered_by_a_request_sent_before_it() -> None:
    cluster = Cluster()
    reads = SharedReads(cluster.read)
    first = asyncio.create_task(reads.read(["a"]))
    await asyncio.sleep(0)
    assert cluster.requests == [["a"]]
    second = asyncio.create_task(reads.read(["a"]))  # the request for "a" is already out
    await answered(cluster, [first])
    await asyncio.sleep(0)
    assert not second.done()
    await answered(cluster, [second])
    assert cluster.requests == [["a"], ["a"]]


async def test_one_ask_for_every_topic_makes_the_shared_request_read_all() -> None:
    cluster = Cluster()
    reads = SharedReads(cluster.read)
    first = asyncio.create_task(reads.read([]))
    await asyncio.sleep(0)
    later = [asyncio.create_task(reads.read(["b"])), asyncio.create_task(reads.read(None))]
    await asyncio.sleep(0)
    await answered(cluster, [first, *later])
    assert cluster.requests == [[], None]


async def test_a_failed_request_fails_every_ask_it_was_sent_for_and_no_later_one() -> None:
    cluster = Cluster()
    reads = SharedReads(cluster.read)
    first = asyncio.create_task(reads.read(["a"]))
    await asyncio.sleep(0)
    shared = [asyncio.create_task(reads.read(["b"])) for _ in range(3)]
    await asyncio.sleep(0)
    await answered(cluster, [first])
    cluster.failure = ConnectionError("the cluster went away")
    await answered(cluster, shared)
    for task in shared:
        with pytest.raises(ConnectionError, match="went away"):
            task.result()
    cluster.failure = None
    after = asyncio.create_task(reads.read(["b"]))
    await answered(cluster, [after])
    assert after.exception() is None
    assert cluster.requests == [["a"], ["b"], ["b"]]


async def test_a_cancelled_asker_leaves_its_request_to_the_next_in_line() -> None:
    cluster = Cluster()
    reads = SharedReads(cluster.read)
    first = asyncio.create_task(reads.read(["a"]))
    await asyncio.sleep(0)
    second = asyncio.create_task(reads.read(["b"]))
    third = asyncio.create_task(reads.read(["c"]))
    await answered(cluster, [first])
    await asyncio.sleep(0)
    assert cluster.requests[-1] == ["b", "c"]  # sent by the second ask, for both
    second.cancel()
    await asyncio.sleep(0)
    await answered(cluster, [third])
    assert second.cancelled() and third.exception() is None
    assert cluster.requests == [["a"], ["b", "c"], ["b", "c"]]
