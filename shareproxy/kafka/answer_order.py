"""The answers one client connection is owed, written in the order of its requests, each as
soon as it and every answer before it are ready.

A client may pipeline Produce and Fetch requests, as to a broker, and their answers come back
from the upstream in any order across brokers. A pending answer is a ``Slot``: filled by a
callback as the broker's answer arrives (a request relayed whole), or by a task; once it is
ready it is written, and whatever was waiting behind it, there and then: no writer task to wake,
no queue to pass through.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any

# the listener's own logger (and its rate limit): these lines are about its connections
log = logging.getLogger("shareproxy.kafka.listener")

Chunks = list[bytes | bytearray | memoryview]


class Slot:
    """An answer on its way that says when it is ready (``fill``), so it is written in that
    same round of the loop; ``cancel`` gives up on it (its connection ended)."""

    __slots__ = ("_cancel", "chunks", "on_ready", "ready")

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.ready = False
        self.chunks: Chunks | None = None  # None: no answer to write
        self.on_ready: Callable[[], None] | None = None
        self._cancel = cancel

    def fill(self, chunks: Chunks | None) -> None:
        if self.ready:  # cancelled meanwhile
            return
        self.ready = True
        self.chunks = chunks
        if self.on_ready is not None:
            self.on_ready()

    @classmethod
    def of(cls, task: asyncio.Task[Chunks | None]) -> Slot:
        """A slot that ``task`` fills."""
        slot = cls(_nothing)
        slot.wait_for(task)
        return slot

    def wait_for(self, task: asyncio.Task[Chunks | None]) -> None:
        """Filled by ``task`` instead, which cancelling the slot cancels on the loop's next
        round, by when a task made this round has started: a task cancelled before its first
        step never starts the coroutines it was given, which would leave the upstream answer
        they await unawaited and its failure unretrieved."""

        def cancel() -> None:
            task.get_loop().call_soon(task.cancel)

        self._cancel = cancel
        task.add_done_callback(self._finished)

    def cancel(self) -> None:
        if not self.ready:
            self.ready = True
            self._cancel()

    def _finished(self, task: asyncio.Task[Chunks | None]) -> None:
        # its own failure or cancellation: no answer (the listener answered or logged)
        ok = not task.cancelled() and task.exception() is None
        self.fill(task.result() if ok else None)


def _nothing() -> None:
    pass


Answer = Chunks | Slot


class AnswersInOrder:
    """``owed`` counts the answers put and not yet written; ``put`` waits while ``limit`` are
    owed (each may be a whole upstream Fetch answer: bounded memory), and ``join`` until none
    is. A connection that broke is written no more; what is owed is only counted off."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        limit: int,
        all_written: Callable[[], None],
        peer: Callable[[], Any],
    ) -> None:
        """``all_written``: called each time the last answer owed has been written."""
        self.writer = writer
        self.limit = limit
        self.all_written = all_written
        self.peer = peer
        self.broken = False
        self._owed: collections.deque[Answer] = collections.deque()
        self._moved: asyncio.Future[None] | None = None  # resolved when answers are written

    @property
    def owed(self) -> int:
        return len(self._owed)

    async def put(self, answer: Answer) -> None:
        try:
            while len(self._owed) >= self.limit:
                await self._written()
        except BaseException:  # the connection ends while the answer waits for room
            self._owed.append(answer)  # so ``close`` cancels it with the rest
            raise
        self._owed.append(answer)
        if type(answer) is Slot:
            answer.on_ready = self._flush
        self._flush()
        if self.broken:
            return
        try:
            await self.writer.drain()  # a client that does not read holds back its requests
        except Exception as exc:  # not a cancellation: the connection ended
            self._broke(exc)

    async def join(self) -> None:
        while self._owed:
            await self._written()

    async def close(self) -> None:
        """The connection ended: nothing more is written, and answers still on their way are
        cancelled (their clients are gone) before the caller closes the upstream link. A slot
        waiting on the broker cancels its upstream future at once, one waiting on a task
        cancels it on the loop's next round (``Slot.wait_for`` says why): the one round waited
        here lets the cancellations reach those answers, so closing the link fails none."""
        self.broken = True
        cancelling = False
        for answer in self._owed:
            if type(answer) is Slot and not answer.ready:
                answer.cancel()
                cancelling = True
        if cancelling:
            await asyncio.sleep(0)

    def _broke(self, exc: Exception) -> None:
        log.info("connection to %s broke while answering: %r", self.peer(), exc)
        self.broken = True

    async def _written(self) -> None:
        if self._moved is None or self._moved.done():
            self._moved = asyncio.get_running_loop().create_future()
        await self._moved

    def _flush(self) -> None:
        """Write every answer at the head that is ready."""
        owed, wrote = self._owed, False
        while owed:
            head = owed[0]
            chunks: Chunks | None
            if type(head) is Slot:
                if not head.ready:
                    break
                chunks = head.chunks
            else:
                chunks = head  # type: ignore[assignment]  # not a slot: the chunks themselves
            owed.popleft()
            wrote = True
            if chunks and not self.broken:
                try:
                    self.writer.writelines(chunks)
                except Exception as exc:  # not a cancellation: the connection ended
                    self._broke(exc)
        if wrote:
            if self._moved is not None and not self._moved.done():
                self._moved.set_result(None)
            if not owed:
                self.all_written()
