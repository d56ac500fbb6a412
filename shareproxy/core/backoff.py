"""Redelivery back-off: how long a record whose lock ended without acceptance waits before it
may be acquired again, growing with its delivery count so a poison record does not spin through
every consumer. Beyond KIP-932 (Kafka's share groups redeliver at once); off unless configured.

The wait is kept as the time the record becomes acquirable again, stored with its state batch,
so a restart or another node taking the share-partition over keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RedeliveryBackoff:
    """``initial_ms`` after the first delivery, times ``multiplier`` per later one, at most
    ``max_ms``. ``initial_ms`` 0 is off: records are acquirable again at once, as in Kafka."""

    initial_ms: int = 0
    multiplier: float = 2.0
    max_ms: int = 60_000

    @property
    def enabled(self) -> bool:
        return self.initial_ms > 0

    def delay_ms(self, delivery_count: int) -> int:
        """The wait after a lock held on delivery ``delivery_count`` (1 = the first) ended."""
        if self.initial_ms <= 0 or delivery_count < 1:
            return 0
        exponent = min(delivery_count - 1, 64)  # beyond any bound a delay can reach
        return int(min(self.initial_ms * self.multiplier**exponent, self.max_ms))
