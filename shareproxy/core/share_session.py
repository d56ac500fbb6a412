"""Share sessions: which share-partitions a member fetches, and the epoch that orders its
requests (0 opens, then 1, 2, … wrapping to 1; -1 closes and releases its locks).

Keyed by (group, member, node) — never by connection: the client opens several connections to
one node. A request with epoch n > 0 must carry exactly the session's next epoch. Yet a session
belongs to the connection that opened it: when that connection closes (the client stopped, or
crashed), the session ends with it and its member's locks end at once, as on Kafka 4.1+, rather
than after the acquisition lock. A session opened again (epoch 0) on another connection belongs
to that one, so the old connection's close leaves it alone.

As on a Kafka broker, a session does not depend on the group's membership: any well-formed
member id may open one (``valid_member_id``), and a member the coordinator has removed keeps
its session. Sessions are a bounded resource of the whole proxy, so each is charged to the
client that opened it (its principal and host) and one client may hold at most
``max_per_client`` of the ``max_sessions``. Many clients share one principal and host (a
plaintext listener, one NAT, one service's replicas), so a full cache does not simply refuse:
a session whose member the group does not have gives way to one whose member it has
(``Standing``), the least recently used first, so made-up member ids never crowd out the
members that exist. A session ends when it is closed (epoch -1), its connection closes, it
gives way, or it is left idle past its timeout. Time comes in as an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from uuid import UUID

from shareproxy.core.errors import ErrorCode, ShareError

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
MAX_MEMBER_ID_LENGTH = 36  # a UUID's text: Kafka's KafkaApis.isMemberIdValid
INVALID_MEMBER_ID = f"MemberId must be set, at most {MAX_MEMBER_ID_LENGTH} characters"

TopicPartition = tuple[UUID, int]
SessionKey = tuple[str, str, int]  # group id, member id, node id
ClientKey = tuple[str, str]  # principal, client host


class Standing(IntEnum):
    """How surely a live member owns a session, as this node can tell: when the cache is full, a
    session gives way only to one of a higher standing."""

    STRANGER = 0  # its group is coordinated here and has no such member
    UNVERIFIED = 1  # its group is coordinated by another node, which alone knows its members
    MEMBER = 2  # a live member of a group coordinated here


def _everyone_a_member(group_id: str, member_id: str) -> Standing:
    return Standing.MEMBER


def valid_member_id(member_id: str) -> bool:
    """Whether a ShareGroupHeartbeat, ShareFetch or ShareAcknowledge may use this member id:
    the only check a Kafka broker makes of it (set, and no longer than a UUID's text)."""
    return 0 < len(member_id) <= MAX_MEMBER_ID_LENGTH


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    key: SessionKey
    epoch: int  # the epoch the next request must carry
    client: ClientKey = ("", "")
    last_used_ms: int = 0
    partitions: list[TopicPartition] = field(default_factory=list)
    connection: int = 0  # the connection that opened it, which it ends with (0: none)

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
    def __init__(
        self,
        max_sessions: int = 2000,
        max_per_client: int | None = None,
        standing: Callable[[str, str], Standing] = _everyone_a_member,
        gave_way: Callable[[ShareSession, SessionKey], None] = lambda session, newcomer: None,
    ) -> None:
        self.max_sessions = max_sessions
        self.max_per_client = max_sessions if max_per_client is None else max_per_client
        self.standing = standing  # of a (group id, member id), asked only when the cache is full
        self.sessions: dict[SessionKey, ShareSession] = {}
        self._per_client: dict[ClientKey, int] = {}
        self._of_connection: dict[int, set[SessionKey]] = {}  # connection -> sessions it opened
        self._gave_way = gave_way  # told of each session closed to make room, and for whom

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.get(key)

    def begin(
        self,
        key: SessionKey,
        epoch: int,
        now_ms: int,
        client: ClientKey = ("", ""),
        *,
        acknowledging_only: bool = False,
        connection: int = 0,
    ) -> ShareSession:
        """Check a request's epoch and return the session it works in.

        Epoch 0 opens a new session on ``connection`` (replacing an older one of the same key);
        a positive epoch must match; -1 returns the session for a last acknowledgement
        (``close`` ends it).
        """
        if epoch == OPEN_EPOCH:
            if acknowledging_only:
                raise ShareError(
                    ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session"
                )
            self.close(key)  # a reopened session replaces the old one, and frees its place
            self._make_room(key, client)
            opened = ShareSession(
                key, next_epoch(OPEN_EPOCH), client, now_ms, connection=connection
            )
            self.sessions[key] = opened
            self._per_client[client] = self._per_client.get(client, 0) + 1
            if connection:
                self._of_connection.setdefault(connection, set()).add(key)
            return opened
        session = self.sessions.get(key)
        if session is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no share session for this member")
        session.last_used_ms = now_ms
        if epoch == CLOSE_EPOCH:
            return session
        if epoch != session.epoch:
            raise ShareError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                f"share session epoch {epoch}, expected {session.epoch}",
            )
        session.epoch = next_epoch(epoch)
        return session

    def _make_room(self, key: SessionKey, client: ClientKey) -> None:
        """Room for one more session of ``client``: within its own limit a session of the same
        client gives way, within the proxy's any session does, if its standing is below the
        newcomer's (the lowest standing first, then the least recently used)."""
        full_for_client = self._per_client.get(client, 0) >= self.max_per_client
        if not full_for_client and len(self.sessions) < self.max_sessions:
            return
        newcomer = self.standing(key[0], key[1])
        if full_for_client and not self._give_way(key, newcomer, client):
            raise ShareError(
                ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                f"{client[0]} from {client[1]} holds its limit of {self.max_per_client} "
                "share sessions",
            )
        if len(self.sessions) >= self.max_sessions and not self._give_way(key, newcomer, None):
            raise ShareError(
                ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                f"the proxy holds its limit of {self.max_sessions} share sessions",
            )

    def _give_way(self, key: SessionKey, newcomer: Standing, client: ClientKey | None) -> bool:
        """Close the session that yields to a newcomer of this standing (of ``client`` only,
        unless None); False where none does."""
        if newcomer == Standing.STRANGER:
            return False  # nothing stands lower: a stranger never takes another's place
        victim: ShareSession | None = None
        rank: tuple[Standing, int] | None = None
        for session in self.sessions.values():
            if client is not None and session.client != client:
                continue
            standing = self.standing(session.key[0], session.key[1])
            if standing >= newcomer:
                continue
            candidate = (standing, session.last_used_ms)
            if rank is None or candidate < rank:
                victim, rank = session, candidate
        if victim is None:
            return False
        self.close(victim.key)
        self._gave_way(victim, key)
        return True

    def close(self, key: SessionKey) -> ShareSession | None:
        session = self.sessions.pop(key, None)
        if session is not None:
            left = self._per_client[session.client] - 1
            if left:
                self._per_client[session.client] = left
            else:
                del self._per_client[session.client]
            opened_on = self._of_connection.get(session.connection)
            if opened_on is not None:
                opened_on.discard(key)
                if not opened_on:
                    del self._of_connection[session.connection]
        return session

    def close_connection(self, connection: int) -> list[ShareSession]:
        """The connection closed: the sessions it opened (and still holds: one opened again on
        another connection is that one's) end, and are returned so their locks end too."""
        keys = self._of_connection.pop(connection, set())
        closed = [self.sessions[key] for key in keys]
        for session in closed:
            self.close(session.key)
        return closed

    def of_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        return [s for k, s in self.sessions.items() if k[0] == group_id and k[1] == member_id]

    def evict_idle(self, now_ms: int, idle_ms_of: Callable[[str], int]) -> list[ShareSession]:
        """Close the sessions unused for longer than their group's idle timeout."""
        idle = [s for s in self.sessions.values() if now_ms - s.last_used_ms > idle_ms_of(s.key[0])]
        for session in idle:
            self.close(session.key)
        return idle
