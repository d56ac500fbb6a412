"""Where an admin reset moves a share-partition's SPSO, decided without I/O or a clock.

The targets are those of Kafka's tools (``GroupOffsetsResetter`` behind kafka-share-groups.sh
and kafka-consumer-groups.sh --reset-offsets): the log's start or end, a time (given, or now
less a duration), an offset, the current SPSO shifted, the current SPSO, or explicit offsets
per partition (a plan read from a file). The runtime looks up the log's bounds and the offset
at a time and passes them, and ``now``, in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.offset_reset import parse_iso_duration

ResetTo = Literal[
    "earliest", "latest", "datetime", "offset", "duration", "shift", "current", "offsets"
]
TOPIC_PARTITION_SEPARATOR = ":"  # Kafka's `topic:0,1,2` scope
# what a reset's datetime may be, said wherever one is refused (UTC when no zone is given)
DATETIME_FORM = "ISO 8601, e.g. 2026-11-21T10:00:00Z or 2026-11-21T11:00:00+01:00"


def _invalid(message: str) -> ShareError:
    return ShareError(ErrorCode.INVALID_REQUEST, message)


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """One reset's target, checked when built (``reset_target``)."""

    to: ResetTo
    at_ms: int | None = None  # datetime
    duration_ms: int | None = None  # duration: now less this
    offset: int | None = None  # offset
    shift: int | None = None  # shift: added to the current SPSO
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # offsets

    def timestamp_ms(self, now_ms: int) -> int | None:
        """The time whose first offset is the target, for the targets that are a time."""
        if self.to == "datetime":
            return None if self.at_ms is None else max(0, self.at_ms)  # Kafka's -1/-2 are special
        if self.to == "duration":
            assert self.duration_ms is not None
            return max(0, now_ms - self.duration_ms)  # before 1970: from the first record
        return None


def reset_target(
    to: ResetTo,
    *,
    now_ms: int,
    at_ms: int | None = None,
    duration: str | None = None,
    offset: int | None = None,
    shift: int | None = None,
    offsets: dict[tuple[str, int], int] | None = None,
) -> ResetTarget:
    """The target, or INVALID_REQUEST naming what it lacks or what is wrong with it."""
    if to == "datetime":
        if at_ms is None:
            raise _invalid("to=datetime needs a datetime")
        if at_ms > now_ms:
            raise _invalid("the datetime is in the future")
        return ResetTarget(to, at_ms=at_ms)
    if to == "duration":
        if not duration:
            raise _invalid("to=duration needs a duration (ISO-8601, such as PT1H or P1DT2H)")
        try:
            duration_ms = parse_iso_duration(duration)
        except ShareError as exc:
            raise _invalid(f"duration {exc.message}") from exc
        return ResetTarget(to, duration_ms=duration_ms)
    if to == "offset":
        if offset is None or offset < 0:
            raise _invalid("to=offset needs an offset >= 0")
        return ResetTarget(to, offset=offset)
    if to == "shift":
        if shift is None:
            raise _invalid("to=shift needs a shift (a number of offsets, + or -)")
        return ResetTarget(to, shift=shift)
    if to == "offsets":
        if not offsets:
            raise _invalid("to=offsets needs offsets: one or more topic, partition, offset")
        if any(o < 0 for o in offsets.values()):
            raise _invalid("an offset in offsets is negative")
        return ResetTarget(to, offsets=dict(offsets))
    return ResetTarget(to)


def clamp(offset: int, earliest: int, latest: int) -> int:
    """Into the log, as Kafka's checkOffsetsRange: above its end the end, below its start the
    start."""
    return max(min(offset, latest), earliest)


def new_start_offset(
    target: ResetTarget,
    topic: str,
    partition: int,
    *,
    current: int | None,
    earliest: int,
    latest: int,
    at_time: int | None = None,
) -> int:
    """The SPSO a share-partition moves to. ``current``: its SPSO now (None: no state);
    ``at_time``: the first offset at or after the target's time (None: none that late)."""
    to = target.to
    if to == "earliest":
        return earliest
    if to == "latest":
        return latest
    if to in ("datetime", "duration"):
        return latest if at_time is None else at_time  # nothing that late: the end, as Kafka
    if to == "offset":
        assert target.offset is not None
        return clamp(target.offset, earliest, latest)
    if to == "shift":
        assert target.shift is not None
        if current is None:
            raise _invalid(
                f"cannot shift the offset of {topic}-{partition}: the group has no start "
                "offset there yet"
            )
        return clamp(current + target.shift, earliest, latest)
    if to == "current":
        return latest if current is None else current  # Kafka: the log's end without state
    return clamp(target.offsets[(topic, partition)], earliest, latest)


def parse_scope(arg: str) -> tuple[str, list[int] | None]:
    """``topic`` (all its partitions: None) or Kafka's ``topic:0,2``."""
    if TOPIC_PARTITION_SEPARATOR not in arg:
        return arg, None
    parts = arg.split(TOPIC_PARTITION_SEPARATOR)
    if len(parts) != 2 or not parts[0]:
        raise _invalid(f"invalid topic {arg!r}: expected a topic name and partitions (t:0,2)")
    topic, listed = parts
    partitions = []
    for p in listed.split(","):
        if not (p.strip().isascii() and p.strip().isdigit()):
            raise _invalid(f"invalid partition {p!r} in {arg!r}")
        partitions.append(int(p))
    return topic, sorted(set(partitions))
