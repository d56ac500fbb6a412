"""The write path's common part (WriteShareGroupState): writes grouped per share-partition, the
state-epoch fence, and the verdict each share-partition gets. Each dialect's writer
(``write_postgres``, ``write_sqlite``) does the SQL its own fastest way on top of this."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncEngine

from shareproxy.core.errors import ErrorCode
from shareproxy.core.persisted import DEFAULT_FOLD_EVERY
from shareproxy.core.store import PartitionWrite, SharePartitionKey

WritesByKey = Mapping[SharePartitionKey, list[PartitionWrite]]
Verdicts = dict[SharePartitionKey, ErrorCode]


def fenced_counts(by_key: WritesByKey) -> list[tuple[str, UUID, int, int, int]]:
    """(group, topic, partition, state epoch, new updates) per key whose writers agree on
    the state epoch (if they disagree at most one can be current: all are refused)."""
    out = []
    for key, key_writes in by_key.items():
        epochs = {w.state_epoch for w in key_writes}
        if len(epochs) != 1:
            continue
        n = sum(1 for w in key_writes if not w.delta.is_empty)
        out.append((key.group_id, key.topic_id, key.partition, epochs.pop(), n))
    return out


def verdict(
    key: SharePartitionKey, counted: Mapping[SharePartitionKey, Any], known: Mapping[Any, int]
) -> ErrorCode:
    """A write passed the epoch check (counted), was fenced (the row exists), or has no state."""
    if key in counted:
        return ErrorCode.NONE
    return ErrorCode.FENCED_STATE_EPOCH if key in known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class StateWriter(ABC):
    """Writes deltas; every ``fold_every`` updates of a share-partition fold into its snapshot
    so that loading it never replays more than that many."""

    def __init__(self, engine: AsyncEngine, fold_every: int = DEFAULT_FOLD_EVERY) -> None:
        if fold_every < 1:
            raise ValueError("fold_every must be at least 1")
        self.engine = engine
        self.fold_every = fold_every

    async def close(self) -> None:  # noqa: B027  (a writer that keeps nothing has nothing to do)
        """Release what the writer keeps between writes."""

    async def write(self, writes: Sequence[PartitionWrite]) -> Verdicts:
        """All deltas in one transaction. One statement locks each share-partition's snapshot
        row, checks its state epoch and counts the new updates; a fenced or unknown one is
        skipped, the others commit."""
        if not writes:
            return {}
        by_key: dict[SharePartitionKey, list[PartitionWrite]] = defaultdict(list)
        for w in writes:
            by_key[w.key].append(w)
        return await self._write(by_key)

    @abstractmethod
    async def _write(self, by_key: WritesByKey) -> Verdicts:
        """The dialect's write of deltas already grouped per share-partition."""
