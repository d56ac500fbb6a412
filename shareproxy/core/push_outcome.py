"""Push delivery (beyond KIP-932): what an endpoint's answer to one pushed record does to the
record. The HTTP status acknowledges it: 2xx accepts; 408, 429, 5xx, a time-out or no
connection releases it (it comes back after the group's redelivery back-off, its delivery
count raised, and at the delivery limit is archived as any other), as does a 1xx or 3xx,
which is no verdict on the record; any other 4xx rejects it. ``Retry-After`` on 429 and 503
asks the pusher to leave the endpoint alone that long. Pure: the caller gives the answer and
the time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from shareproxy.core.states import AcknowledgeType

# statuses that say "not now" rather than "never": the record is released, not rejected
_RETRIABLE = frozenset({408, 429})
# statuses whose Retry-After the pusher honours (RFC 9110 names these two)
_RETRY_AFTER_HONOURED = frozenset({429, 503})
# the longest a Retry-After may hold an endpoint's pushes back: an endpoint asking for a day
# would otherwise stall the group unseen
MAX_RETRY_AFTER_MS = 15 * 60 * 1000


class PushOutcome(enum.Enum):
    """What became of one pushed record: the metrics' ``outcome`` label."""

    ACCEPTED = "accepted"
    RELEASED = "released"
    REJECTED = "rejected"
    TIMED_OUT = "timed_out"  # no answer in time, or none at all: released

    @property
    def acknowledge_type(self) -> AcknowledgeType:
        if self is PushOutcome.ACCEPTED:
            return AcknowledgeType.ACCEPT
        if self is PushOutcome.REJECTED:
            return AcknowledgeType.REJECT
        return AcknowledgeType.RELEASE


@dataclass(frozen=True, slots=True)
class PushAnswer:
    """The endpoint's answer as the pusher acts on it."""

    outcome: PushOutcome
    status: int | None  # None: no HTTP answer (time-out, refused, reset)
    retry_after_ms: int = 0  # how long to push nothing more to the endpoint (0: go on)

    @property
    def endpoint_failing(self) -> bool:
        """Whether the answer counts towards an outage of the endpoint (back off, warn once):
        no answer, or one that says the endpoint cannot serve now."""
        return self.status is None or self.status >= 500 or self.status in _RETRIABLE


def outcome_of(status: int | None) -> PushOutcome:
    """The record's fate by the answer's status (None: no answer)."""
    if status is None:
        return PushOutcome.TIMED_OUT
    if 200 <= status < 300:
        return PushOutcome.ACCEPTED
    if status in _RETRIABLE or not 400 <= status < 500:
        # 5xx; and 1xx or 3xx, which are no verdict on the record (a moved endpoint is the
        # operator's to fix): released, and archived at the delivery limit as any other
        return PushOutcome.RELEASED
    return PushOutcome.REJECTED


def retry_after_ms(value: str | None, now_ms: int) -> int:
    """How long a ``Retry-After`` value asks to wait, in ms, at most ``MAX_RETRY_AFTER_MS``:
    delay-seconds or an HTTP-date (RFC 9110 10.2.3); 0 when absent, past or not readable."""
    if not value:
        return 0
    value = value.strip()
    if value.isascii() and value.isdigit():  # ("²" is a digit to Python, not to HTTP)
        seconds = int(value) if len(value) <= 10 else MAX_RETRY_AFTER_MS  # (no 4,300-digit int)
        return min(seconds * 1000, MAX_RETRY_AFTER_MS)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return 0
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a zone-less one is read as such
        return 0
    return max(0, min(int(when.timestamp() * 1000) - now_ms, MAX_RETRY_AFTER_MS))


def rejection_reason(status: int) -> str:
    """The archive log's reason for a record its endpoint rejected."""
    return f"rejected: HTTP {status}"


def judge(status: int | None, retry_after: str | None, now_ms: int) -> PushAnswer:
    """The answer to one push, read: the record's outcome, and any wait the endpoint asked for
    (honoured on 429 and 503 only)."""
    wait = retry_after_ms(retry_after, now_ms) if status in _RETRY_AFTER_HONOURED else 0
    return PushAnswer(outcome_of(status), status, wait)
