"""``share.auto.offset.reset``: where a share-partition with no stored state starts.

The policy is parsed here and resolved through an injected ``OffsetLookup`` (the upstream
cluster's ListOffsets in the proxy, a dict in tests), so the decision stays free of I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.names import MAX_INT64


class ResetStrategy(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    BY_DURATION = "by_duration"


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    strategy: ResetStrategy
    duration_ms: int = 0

    def __str__(self) -> str:
        if self.strategy is ResetStrategy.BY_DURATION:
            return f"by_duration:{format_iso_duration(self.duration_ms)}"
        return self.strategy.value


class OffsetLookup(Protocol):
    """ListOffsets for one topic-partition."""

    async def earliest_offset(self) -> int: ...

    async def latest_offset(self) -> int: ...

    async def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """First offset whose timestamp is at or after ``timestamp_ms``; None if there is none."""
        ...


_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.ASCII,
)


def parse_iso_duration(text: str) -> int:
    """An ISO-8601 duration (days and time parts, as Java's ``Duration.parse``) in ms."""
    m = _DURATION.match(text.strip().upper())
    if not m or not any(m.groups()):
        raise ShareError(
            ErrorCode.INVALID_CONFIG, f"{text!r} is not an ISO-8601 duration such as PT1H or P1D"
        )
    days, hours, minutes = (int(m.group(k) or 0) for k in "dhm")
    whole, _, fraction = (m.group("s") or "0").partition(".")
    millis = int((fraction + "000")[:3])  # finer than a millisecond is dropped
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + int(whole) * 1000 + millis
    if total > MAX_INT64:  # Kafka's ms fields are longs
        raise ShareError(ErrorCode.INVALID_CONFIG, f"{text!r} is longer than a Java Duration holds")
    return total


def format_iso_duration(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    if millis:
        return f"PT{seconds}.{millis:03d}S"
    return f"PT{seconds}S"


def parse_auto_offset_reset(text: str) -> AutoOffsetReset:
    """``latest`` | ``earliest`` | ``by_duration:<ISO-8601 duration>``."""
    value = text.strip().lower()
    if value in ("earliest", "latest"):
        return AutoOffsetReset(ResetStrategy(value))
    if value.startswith("by_duration:"):
        duration = parse_iso_duration(text.strip()[len("by_duration:") :])
        return AutoOffsetReset(ResetStrategy.BY_DURATION, duration)
    raise ShareError(
        ErrorCode.INVALID_CONFIG,
        f"share.auto.offset.reset {text!r}: expected earliest, latest or by_duration:<ISO-8601>",
    )


async def resolve_start_offset(reset: AutoOffsetReset, lookup: OffsetLookup, now_ms: int) -> int:
    """The SPSO a new share-partition starts at under ``reset``."""
    if reset.strategy is ResetStrategy.EARLIEST:
        return await lookup.earliest_offset()
    if reset.strategy is ResetStrategy.LATEST:
        return await lookup.latest_offset()
    found = await lookup.offset_for_timestamp(max(0, now_ms - reset.duration_ms))
    if found is None:  # nothing that recent: start at the end, as Kafka does
        return await lookup.latest_offset()
    return found
