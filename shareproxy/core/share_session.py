"""Share sessions: which share-partitions a member fetches, and the epoch that orders its
requests (0 opens, then 1, 2, … wrapping to 1; -1 closes and releases its locks).

Keyed by (group, member, node) — never by connection: the client opens several connections to
one node. A request with epoch n > 0 must carry exactly the session's next epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[UUID, int]
SessionKey = tuple[str, str, int]  # group id, member id, node id


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    key: SessionKey
    epoch: int  # the epoch the next request must carry
    partitions: list[TopicPartition] = field(default_factory=list)

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        known = set(self.partitions)
        for tp in partitions:
            if tp not in known:
                self.partitions.append(tp)
                known.add(tp)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        self.partitions = [tp for tp in self.partitions if tp not in gone]


class ShareSessionCache:
    def __init__(self, max_sessions: int = 1000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def begin(
        self, key: SessionKey, epoch: int, *, acknowledging_only: bool = False
    ) -> ShareSession:
        """Check a request's epoch and return the session it works in.

        Epoch 0 opens a new session (replacing an older one of the same key); a positive epoch
        must match; -1 returns the session for a last acknowledgement (``close`` ends it).
        """
        if epoch == OPEN_EPOCH:
            if acknowledging_only:
                raise ShareError(
                    ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session"
                )
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                raise ShareError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    f"the proxy holds its limit of {self.max_sessions} share sessions",
                )
            session = ShareSession(key, next_epoch(OPEN_EPOCH))
            self.sessions[key] = session
            return session
        session = self.sessions.get(key)
        if session is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no share session for this member")
        if epoch == CLOSE_EPOCH:
            return session
        if epoch != session.epoch:
            raise ShareError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"share session epoch {epoch}, expected {session.epoch}",
            )
        session.epoch = next_epoch(epoch)
        return session

    def close(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.pop(key, None)

    def of_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        return [s for k, s in self.sessions.items() if k[0] == group_id and k[1] == member_id]
