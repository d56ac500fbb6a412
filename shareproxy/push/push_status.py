"""What one node knows of a group's push: its outcomes since the node started, the endpoint's
health and the last few answers. The REST API sums the nodes' parts, as it sums the groups'
counters, so its answer is the same from every node."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from shareproxy.core.push_outcome import PushAnswer, PushOutcome

RECENT = 20  # answers kept per group and node, newest last


@dataclass(frozen=True, slots=True)
class PushedAnswer:
    """One record's push as the console lists it."""

    at_ms: int
    topic: str
    partition: int
    offset: int
    delivery_count: int
    status: int | None  # None: no answer
    outcome: PushOutcome
    took_ms: int


@dataclass(slots=True)
class PushStatus:
    outcomes: dict[PushOutcome, int] = field(default_factory=lambda: dict.fromkeys(PushOutcome, 0))
    in_flight: int = 0
    down_since_ms: int | None = None  # the endpoint's outage under way, if any
    last_failure: int | None = None  # the status of the last failing answer (None: no answer)
    problem: str | None = None  # why this node cannot push now (a URL no longer allowed, …)
    recent: deque[PushedAnswer] = field(default_factory=lambda: deque(maxlen=RECENT))

    def answered(self, pushed: PushedAnswer, answer: PushAnswer) -> None:
        self.outcomes[pushed.outcome] += 1
        self.recent.append(pushed)
        if answer.endpoint_failing:
            self.last_failure = answer.status

    def shown(self) -> dict[str, Any]:
        """The JSON the REST API sums over the nodes."""
        return {
            "outcomes": {o.value: n for o, n in self.outcomes.items()},
            "in_flight": self.in_flight,
            "endpoint_down_since_ms": self.down_since_ms,
            "last_failure_status": self.last_failure,
            "problem": self.problem,
            "recent": [
                {
                    "at_ms": p.at_ms,
                    "topic": p.topic,
                    "partition": p.partition,
                    "offset": p.offset,
                    "delivery_count": p.delivery_count,
                    "status": p.status,
                    "outcome": p.outcome.value,
                    "took_ms": p.took_ms,
                }
                for p in self.recent
            ],
        }
