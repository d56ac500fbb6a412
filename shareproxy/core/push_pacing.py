"""Push delivery (beyond KIP-932): how fast a group's pushes may go to its endpoint. While the
endpoint answers, as fast as ``max_in_flight`` requests at once allow. Once it fails (no answer,
408, 429 or 5xx: ``PushAnswer.endpoint_failing``), it is down: pushes pause for a back-off that
doubles with each failure (100 ms to 30 s) or for as long as its ``Retry-After`` asks, then a
single request probes it; the first answer that is not a failure brings it up again at full
speed. A down endpoint costs no busy loop, and its outage is told once as it begins and once as
it ends. Pure: the caller gives the answers and the time.
"""

from __future__ import annotations

import enum

from shareproxy.core.push_outcome import PushAnswer

FIRST_BACKOFF_MS = 100
MAX_BACKOFF_MS = 30_000


class EndpointChange(enum.Enum):
    """A turn in an endpoint's health: what the pusher logs (one line each) and alerts on."""

    DOWN = "down"
    UP = "up"


class EndpointPacing:
    """One endpoint's pace, owned by the pusher that calls it."""

    def __init__(self, first_backoff_ms: int = FIRST_BACKOFF_MS) -> None:
        self.first_backoff_ms = first_backoff_ms
        self.down_since_ms: int | None = None  # when the outage began (None: the endpoint is up)
        self.failures = 0  # in a row, in this outage
        self.paused_until_ms = 0  # no push starts before this
        self.last_status: int | None = None  # of the last answer that failed (None: no answer)

    @property
    def down(self) -> bool:
        return self.down_since_ms is not None

    def in_flight_allowed(self, max_in_flight: int) -> int:
        """How many pushes may be under way at once: one probe while the endpoint is down."""
        return 1 if self.down else max_in_flight

    def may_push(self, now_ms: int) -> bool:
        """Whether a push may start now (the pusher also keeps to ``in_flight_allowed``)."""
        return now_ms >= self.paused_until_ms

    def answered(
        self, answer: PushAnswer, now_ms: int, sent_ms: int | None = None
    ) -> EndpointChange | None:
        """Take in the answer to a request sent at ``sent_ms`` (None: now); the change in the
        endpoint's health it makes, if any. The failures of requests sent before the outage
        began are that outage's news, not more of it: only probes make the back-off grow,
        so a full window of requests failing together pauses as long as one. Likewise only a
        probe's success ends an outage: an older request's says nothing of the endpoint now,
        and must not cut short the wait a Retry-After asked for."""
        sent_before = (
            self.down_since_ms is not None and sent_ms is not None and sent_ms < self.down_since_ms
        )
        if not answer.endpoint_failing:  # (Retry-After comes only with a failing 429 or 503)
            if self.down_since_ms is None or sent_before:
                return None
            self.down_since_ms = None
            self.failures = 0
            self.paused_until_ms = 0
            return EndpointChange.UP
        self.last_status = answer.status
        if sent_before:
            self.paused_until_ms = max(self.paused_until_ms, now_ms + answer.retry_after_ms)
            return None
        self.failures += 1
        backoff = min(self.first_backoff_ms << min(self.failures - 1, 20), MAX_BACKOFF_MS)
        wait = max(backoff, answer.retry_after_ms)
        self.paused_until_ms = max(self.paused_until_ms, now_ms + wait)
        if self.down_since_ms is not None:
            return None
        self.down_since_ms = now_ms
        return EndpointChange.DOWN
