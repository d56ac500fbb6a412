"""share.auto.offset.reset: parsing and resolution through an injected offset lookup."""

from __future__ import annotations

import bisect

import pytest

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.offset_reset import (
    AutoOffsetReset,
    ResetStrategy,
    parse_auto_offset_reset,
    parse_iso_duration,
    resolve_start_offset,
)
from shareproxy.core.share_partition import SharePartition


class LogOffsets:
    """A partition's log as ListOffsets sees it: offsets 40..99 with timestamps 1000 apart."""

    def __init__(self) -> None:
        self.offsets = list(range(40, 100))
        self.timestamps = [o * 1000 for o in self.offsets]

    async def earliest_offset(self) -> int:
        return self.offsets[0]

    async def latest_offset(self) -> int:
        return self.offsets[-1] + 1

    async def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        i = bisect.bisect_left(self.timestamps, timestamp_ms)
        return self.offsets[i] if i < len(self.offsets) else None


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("P1D", 86_400_000),
        ("PT0.5S", 500),
        ("P1DT2H3M4S", 93_784_000),
        ("pt15m", 900_000),
    ],
)
def test_iso_durations(text, ms):
    assert parse_iso_duration(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT-1H", "P1W", "hour"])
def test_bad_iso_durations_are_invalid_config(text):
    with pytest.raises(ShareError) as e:
        parse_iso_duration(text)
    assert e.value.code == ErrorCode.INVALID_CONFIG


def test_policies_parse_and_print_back():
    assert parse_auto_offset_reset("latest") == AutoOffsetReset(ResetStrategy.LATEST)
    assert parse_auto_offset_reset(" Earliest ") == AutoOffsetReset(ResetStrategy.EARLIEST)
    by = parse_auto_offset_reset("by_duration:PT30S")
    assert by == AutoOffsetReset(ResetStrategy.BY_DURATION, 30_000)
    assert str(by) == "by_duration:PT30S"
    for bad in ("none", "by_duration:", "by_duration:soon", "latest,earliest"):
        with pytest.raises(ShareError):
            parse_auto_offset_reset(bad)


async def test_resolution_through_the_lookup():
    log = LogOffsets()
    now = 100_000
    assert await resolve_start_offset(parse_auto_offset_reset("earliest"), log, now) == 40
    assert await resolve_start_offset(parse_auto_offset_reset("latest"), log, now) == 100
    # records from the last 10 s: timestamps >= 90 000 → offset 90
    by = parse_auto_offset_reset("by_duration:PT10S")
    assert await resolve_start_offset(by, log, now) == 90
    # nothing that recent → latest
    assert await resolve_start_offset(by, log, 10**9) == 100
    # everything is that recent → the first record
    assert await resolve_start_offset(parse_auto_offset_reset("by_duration:P1D"), log, now) == 40


async def test_a_new_share_partition_starts_where_the_policy_says():
    start = await resolve_start_offset(parse_auto_offset_reset("earliest"), LogOffsets(), 0)
    sp, delta = SharePartition.initialized(start)
    assert (sp.spso, sp.speo, delta.start_offset, delta.state_batches) == (40, 40, 40, ())
