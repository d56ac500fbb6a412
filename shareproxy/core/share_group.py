"""A share group's membership as KIP-932's group coordinator keeps it: client-generated member
ids, member / group / assignment epochs, session timeouts, the group size limit.

Pure: ``now_ms`` is an argument. The runtime feeds heartbeats and topic metadata in and acts on
what comes out (a new assignment to send, members whose locks must be released).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from uuid import UUID

from shareproxy.core.assignor import ASSIGNORS, DEFAULT, Assignment

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


class GroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


class HeartbeatError(Enum):
    """Kafka error codes a heartbeat can be refused with."""

    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    UNKNOWN_MEMBER_ID = 25
    INVALID_REQUEST = 42
    GROUP_ID_NOT_FOUND = 69
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_MEMBER_EPOCH = 110


def heartbeat_problem(
    member_id: str,
    member_epoch: int,
    rack_id: str | None,
    subscribed_topics: Sequence[str] | None,
) -> str | None:
    """Why a ShareGroupHeartbeat is INVALID_REQUEST whatever the group holds, in Kafka's words
    (GroupMetadataManager.throwIfShareGroupHeartbeatRequestIsInvalid); None: it is not. Every
    join names its topics, a rejoin of a known member too."""
    if rack_id == "":
        return "RackId can't be empty."
    if member_epoch < LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    if not member_id:
        return "MemberId can't be empty."
    if member_epoch == JOIN_EPOCH and not subscribed_topics:
        return "SubscribedTopicNames must be set in first request."
    return None


@dataclass
class Member:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    assignment: Assignment = field(default_factory=dict)
    last_heartbeat_ms: int = 0
    sent_epoch: int = -1  # the epoch whose assignment the member was last sent
    # what the coordinator wants the member to have; it moves there on its next heartbeat
    target: Assignment = field(default_factory=dict)
    target_epoch: int = 0
    # the epoch before the last move: a heartbeat carrying it is accepted, since the answer
    # that gave the member its new epoch may have been lost
    previous_epoch: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: HeartbeatError | None
    member_epoch: int
    assignment: Assignment | None  # None: unchanged since the member last heard it
    message: str | None = None
    heartbeat_interval_ms: int | None = None  # None: the group's configured interval


# While a group's targets settle, members are asked back sooner than the configured interval:
# a member that heard its assignment just before others joined would otherwise keep it, and
# fetch partitions no longer its own, for a whole interval. SETTLING_PER_MEMBER_MS per member
# keeps the coordinator's extra heartbeats under 1000 / SETTLING_PER_MEMBER_MS a second: at 5 ms
# (200 a second) a thousand members joining a starved 2-core node churned, its joins unanswered.
SETTLING_MIN_MS = 250
SETTLING_PER_MEMBER_MS = 50


DEFAULT_MAX_SIZE = 200  # members per group, as Kafka's group.share.max.size
MIN_MAX_SIZE, MAX_MAX_SIZE = 10, 1000  # Kafka's range for group.share.max.size


class ShareGroup:
    def __init__(
        self, group_id: str, max_size: int = DEFAULT_MAX_SIZE, assignor: str = DEFAULT
    ) -> None:
        self.group_id = group_id
        self.max_size = max_size
        self.assignor = assignor  # a name in ASSIGNORS (group.share.assignors)
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.rebalances = 0  # target assignments computed, ever (for metrics)
        self.targets_moved_ms: int | None = None  # when the coordinator last saw a target move
        self._untimed_move = False  # a target moved where no clock was at hand (metadata)
        self.members: dict[str, Member] = {}
        self.topics: dict[str, tuple[UUID, int]] = {}  # upstream: name -> (id, partitions)
        self.dead = False
        # how many members have, or are to have, each partition: kept with every change of a
        # member's target or assignment, as fair work asks it on every fetch
        self._holding: Counter[tuple[UUID, int]] = Counter()
        # how many members subscribe to each topic name: every heartbeat asks which names the
        # group subscribes to, which must not cost a walk over a thousand members
        self._subscribers: Counter[str] = Counter()

    def members_on(self, topic_id: UUID, partition: int) -> int:
        """How many members have this partition assigned or are to have it."""
        return self._holding.get((topic_id, partition), 0)

    def _move(self, member: Member, target: Assignment, assignment: Assignment) -> None:
        """Give ``member`` a new target and assignment, keeping the holding counts."""
        before, after = _held(member.target, member.assignment), _held(target, assignment)
        member.target, member.assignment = target, assignment
        holding = self._holding
        for key in before - after:
            holding[key] -= 1
            if not holding[key]:
                del holding[key]
        for key in after - before:
            holding[key] += 1

    def _remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._move(member, {}, {})
            self._subscribe(member.subscribed_topics, ())
        return member

    def _subscribe(self, before: Sequence[str], after: Sequence[str]) -> None:
        """A member's subscription changed from ``before`` to ``after``: keep the counts."""
        subscribers = self._subscribers
        for name in set(before) - set(after):
            subscribers[name] -= 1
            if not subscribers[name]:
                del subscribers[name]
        for name in set(after) - set(before):
            subscribers[name] += 1

    @property
    def state(self) -> GroupState:
        if self.dead:
            return GroupState.DEAD
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return set(self._subscribers)

    # ------------------------------------------------------------------ heartbeats
    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        now_ms: int,
        *,
        subscribed_topics: Sequence[str] | None = None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        heartbeat_interval_ms: int | None = None,
    ) -> HeartbeatResult:
        """``heartbeat_interval_ms``: the configured interval, for the answer to shorten while
        the targets settle (None: the answer leaves the interval to the caller)."""
        invalid = heartbeat_problem(member_id, member_epoch, rack_id, subscribed_topics)
        if invalid is not None:
            return HeartbeatResult(HeartbeatError.INVALID_REQUEST, member_epoch, None, invalid)
        if member_epoch == LEAVE_EPOCH:
            if self._remove(member_id) is None:
                return HeartbeatResult(
                    HeartbeatError.UNKNOWN_MEMBER_ID, member_epoch, None, "unknown member"
                )
            self._bump()
            return HeartbeatResult(None, LEAVE_EPOCH, None)
        member = self.members.get(member_id)
        if member_epoch == JOIN_EPOCH:
            if member is None:
                if len(self.members) >= self.max_size:
                    return HeartbeatResult(
                        HeartbeatError.GROUP_MAX_SIZE_REACHED,
                        member_epoch,
                        None,
                        f"the group already has {self.max_size} members",
                    )
                member = Member(
                    member_id, 0, client_id, client_host, rack_id, tuple(subscribed_topics or ())
                )
                self.members[member_id] = member
                self._subscribe((), member.subscribed_topics)
                self._bump()
            else:  # a rejoin: it lost track, so it must hear its assignment again
                member.sent_epoch = -1
                if subscribed_topics is not None:
                    self._resubscribe(member, subscribed_topics)
        else:
            if member is None:
                return HeartbeatResult(
                    HeartbeatError.UNKNOWN_MEMBER_ID, member_epoch, None, "unknown member"
                )
            if member_epoch == member.previous_epoch < member.member_epoch:
                member.sent_epoch = -1  # it missed the answer with its epoch: it hears it again
            elif member_epoch != member.member_epoch:
                return HeartbeatResult(
                    HeartbeatError.FENCED_MEMBER_EPOCH,
                    member_epoch,
                    None,
                    f"member epoch {member_epoch}, expected {member.member_epoch}",
                )
            if subscribed_topics is not None:
                self._resubscribe(member, subscribed_topics)
        if rack_id is not None:
            member.rack_id = rack_id
        member.last_heartbeat_ms = now_ms
        self._reassign_if_needed()
        self._note_moves(now_ms)
        if member.target_epoch > member.member_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = member.target_epoch
            self._move(member, member.target, member.target)
        interval = None
        if heartbeat_interval_ms is not None:
            interval = self.interval_to_answer(heartbeat_interval_ms, now_ms)
        # as Kafka: a full request (SubscribedTopicNames set) always hears its assignment
        if member.sent_epoch != member.member_epoch or subscribed_topics is not None:
            member.sent_epoch = member.member_epoch
            return HeartbeatResult(
                None, member.member_epoch, dict(member.assignment), None, interval
            )
        return HeartbeatResult(None, member.member_epoch, None, None, interval)

    def interval_to_answer(self, configured_ms: int, now_ms: int) -> int:
        """The interval to give a member now: ``configured_ms``, or shorter while some target
        moved within the last ``configured_ms``, so members hear of later moves soon."""
        moved = self.targets_moved_ms
        if moved is None or now_ms - moved >= configured_ms:
            return configured_ms
        settling = max(SETTLING_MIN_MS, SETTLING_PER_MEMBER_MS * len(self.members))
        return min(configured_ms, settling)

    def _note_moves(self, now_ms: int) -> None:
        """Time the target moves made since the last call (metadata moves them untimed)."""
        if self._untimed_move:
            self._untimed_move = False
            self.targets_moved_ms = now_ms

    def _resubscribe(self, member: Member, topics: Sequence[str]) -> None:
        topics = tuple(topics)
        if set(topics) != set(member.subscribed_topics):
            self._subscribe(member.subscribed_topics, topics)
            member.subscribed_topics = topics
            self._bump()

    # ------------------------------------------------------------------ the world changing
    def expire_members(self, now_ms: int, session_timeout_ms: int) -> list[str]:
        """Remove members silent for longer than the session timeout; their locks must go."""
        gone = [
            m.member_id
            for m in self.members.values()
            if now_ms - m.last_heartbeat_ms > session_timeout_ms
        ]
        for member_id in gone:
            self._remove(member_id)
        if gone:
            self._bump()
            self._reassign_if_needed()
            self._note_moves(now_ms)
        return gone

    def update_topics(self, topics: Mapping[str, tuple[UUID, int]]) -> bool:
        """New upstream metadata for the subscribed topics; True if the group epoch moved."""
        subscribed = self._subscribers
        relevant = {n: t for n, t in topics.items() if n in subscribed}
        current = {n: t for n, t in self.topics.items() if n in subscribed}
        self.topics = dict(topics)
        if relevant != current:
            self._bump()
            self._reassign_if_needed()
            return True
        return False

    def _bump(self) -> None:
        self.group_epoch += 1

    def _reassign_if_needed(self) -> None:
        if self.assignment_epoch >= self.group_epoch:
            return
        targets = ASSIGNORS[self.assignor](
            {m.member_id: m.subscribed_topics for m in self.members.values()},
            self.topics,
            {m.member_id: m.target for m in self.members.values()},
        )
        self.assignment_epoch = self.group_epoch
        self.rebalances += 1
        moved = False
        for m in self.members.values():
            new = targets.get(m.member_id, {})
            if new != m.target or m.target_epoch == 0:
                moved = moved or new != m.target
                self._move(m, new, m.assignment)
                m.target_epoch = self.assignment_epoch
        if moved:
            self._untimed_move = True


def _held(*assignments: Assignment) -> set[tuple[UUID, int]]:
    return {(tid, p) for a in assignments for tid, parts in a.items() for p in parts}
