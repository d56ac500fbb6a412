"""Push delivery (beyond KIP-932): what a share group's push is, as its admin sets it and the
store keeps it. One push per group: the endpoint every record of its topics is POSTed to, how
many requests may be under way at once per node, and how long one may take. The authorization
is a secret: it is sent to the endpoint and kept in the store, but never shown back (``shown``
says only whether one is set).

Pure: the bounds and the stored form, checked here once for the REST API, the CLI and the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from shareproxy.core.names import topic_name_problem

DEFAULT_MAX_IN_FLIGHT = 16
MAX_IN_FLIGHT = (1, 1024)  # requests under way at once, per group and node
DEFAULT_TIMEOUT_MS = 30_000
TIMEOUT_MS = (100, 3_600_000)  # a request's time-out; it is cut to the lock's remaining time
MAX_TOPICS = 100
MAX_AUTHORIZATION_CHARS = 8192
# the member the pusher acquires as, on every node: each node pushes the share-partitions it
# leads, so one name is never used for one share-partition by two nodes at once
PUSH_MEMBER_ID = "shareproxy-push"
# how long before the lock ends a request is given up: the acknowledgement must still reach
# the leader while the lock holds
LOCK_MARGIN_MS = 250


class PushSpecError(ValueError):
    """A push that cannot be set, and why (the REST API's 400, the CLI's message)."""


@dataclass(frozen=True, slots=True)
class PushSpec:
    """One group's push."""

    url: str
    topics: tuple[str, ...]
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    # the Authorization header's value: a secret, kept out of every repr
    authorization: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            raise PushSpecError(problem)

    def stored(self) -> dict[str, Any]:
        """The form the store keeps (JSON)."""
        return {
            "url": self.url,
            "topics": list(self.topics),
            "max_in_flight": self.max_in_flight,
            "timeout_ms": self.timeout_ms,
            "authorization": self.authorization,
        }

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> PushSpec:
        return cls(
            url=str(stored["url"]),
            topics=tuple(str(t) for t in stored["topics"]),
            max_in_flight=int(stored.get("max_in_flight", DEFAULT_MAX_IN_FLIGHT)),
            timeout_ms=int(stored.get("timeout_ms", DEFAULT_TIMEOUT_MS)),
            authorization=stored.get("authorization"),
        )

    def shown(self) -> dict[str, Any]:
        """What an admin may see of it: everything but the authorization's value."""
        shown = self.stored()
        shown["authorization"] = "set" if self.authorization else None
        return shown

    def timeout_within(self, lock_left_ms: int) -> int:
        """The request's time-out, given how long the record's acquisition lock has left: it
        ends before the lock does, so a record is never pushed twice at once (an answer
        after the lock ended would acknowledge a record another push may hold)."""
        return max(0, min(self.timeout_ms, lock_left_ms - LOCK_MARGIN_MS))


def _within(name: str, value: int, bounds: tuple[int, int]) -> str | None:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return f"{name} must be an integer from {low} to {high}, not {value!r}"
    return None


def _problem(spec: PushSpec) -> str | None:
    if not spec.url:
        return "url must be set"
    if not spec.url.isascii() or any(c.isspace() or not c.isprintable() for c in spec.url):
        return "url must be printable ASCII without spaces (percent-encode the rest)"
    if not spec.topics:
        return "topics must name at least one topic"
    if len(spec.topics) > MAX_TOPICS:
        return f"topics may name at most {MAX_TOPICS} topics"
    if len(set(spec.topics)) != len(spec.topics):
        return "topics names a topic twice"
    for topic in spec.topics:
        problem = topic_name_problem(topic)
        if problem is not None:
            return f"topics: {problem}"
    for problem in (
        _within("max_in_flight", spec.max_in_flight, MAX_IN_FLIGHT),
        _within("timeout_ms", spec.timeout_ms, TIMEOUT_MS),
    ):
        if problem is not None:
            return problem
    auth = spec.authorization
    if auth is not None:
        if not auth or len(auth) > MAX_AUTHORIZATION_CHARS:
            return f"authorization must be 1 to {MAX_AUTHORIZATION_CHARS} characters"
        if any(not 0x20 <= ord(c) < 0x7F for c in auth) or auth != auth.strip():
            return "authorization must be printable ASCII, no space around it (a header value)"
    return None


class PushStore(Protocol):
    """Where pushes are kept: with their group, which is created if it is not stored. Each
    change raises the store's configs version, so every node reads the pushes again."""

    async def set_push(self, group_id: str, spec: Mapping[str, Any]) -> bool:
        """Store the group's push (its ``PushSpec.stored`` form); True if it had none."""
        ...

    async def remove_push(self, group_id: str) -> bool:
        """False if the group had no push."""
        ...

    async def pushes(self) -> dict[str, dict[str, Any]]:
        """Every group's push, by group id."""
        ...
