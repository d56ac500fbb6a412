"""Group commit: writes from every partition and connection that arrive while a transaction is
in flight go together in the next one, so durability costs one round trip per batch of writes,
not per acknowledgement."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from shareproxy.core.errors import ErrorCode
from shareproxy.core.store import (
    COORDINATOR_UNAVAILABLE,
    PartitionWrite,
    ShareStateStore,
    StoreUnavailable,
)
from shareproxy.telemetry import metrics
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line

log = logging.getLogger(__name__)


class GroupCommitter:
    def __init__(self, store: ShareStateStore, max_batch: int = 5000) -> None:
        self.store = store
        self.max_batch = max_batch
        self._pending: list[tuple[PartitionWrite, asyncio.Future[ErrorCode]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writing = False  # a batch has left the queue and its transaction is under way
        self.commits = 0
        self.writes = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="group-commit")

    async def stop(self) -> None:
        """Commit what is pending, then stop: queued writes and the transaction under way
        (cancelling that one would leave its writers waiting for ever)."""
        if self._task is None:
            return
        while self._pending or self._writing:
            self._wakeup.set()
            await asyncio.sleep(0.01)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def commit(self, write: PartitionWrite) -> ErrorCode:
        """Resolve once ``write`` is durable (NONE) or refused (its error code)."""
        if self._task is None:
            raise RuntimeError("the group committer is not running")
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._pending.append((write, future))
        self._wakeup.set()
        return await future

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                metrics.STORE_COMMIT_BATCH.observe(len(batch))
                self._writing = True
                try:
                    with metrics.STORE_COMMIT_SECONDS.time():
                        results = await self.store.write([w for w, _ in batch])
                except Exception as exc:
                    if isinstance(exc, StoreUnavailable):  # answered retriable
                        STORE_OUTAGE.failed(
                            f"writing {len(batch)} share-partitions", first_line(exc)
                        )
                    else:
                        log.exception("state store write of %d share-partitions failed", len(batch))
                    results = {}
                    # retriable, as Kafka answers when its share coordinator cannot write:
                    # nothing was written, the client sends the acknowledgement again
                    outcome = COORDINATOR_UNAVAILABLE
                else:
                    STORE_OUTAGE.answered()
                    outcome = ErrorCode.NONE
                    self.commits += 1
                    self.writes += len(batch)
                for write, future in batch:
                    if not future.done():
                        future.set_result(results.get(write.key, outcome))
                self._writing = False
