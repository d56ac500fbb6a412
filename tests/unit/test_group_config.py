"""Group configs: names and bounds, and what a group's overrides make of the defaults."""

from __future__ import annotations

import pytest

from shareproxy.core import group_config as gc
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.lag import partition_lag
from shareproxy.core.states import RecordState


def test_valid_changes_merge_and_none_removes_an_override():
    merged = gc.validate({gc.LOCK_DURATION: "20000", gc.ISOLATION_LEVEL: "read_committed"}, {})
    assert merged == {gc.LOCK_DURATION: "20000", gc.ISOLATION_LEVEL: "read_committed"}
    assert gc.validate({gc.LOCK_DURATION: None}, merged) == {gc.ISOLATION_LEVEL: "read_committed"}


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("share.nope", "1", "unknown group config"),
        (gc.LOCK_DURATION, "10", "outside"),
        (gc.LOCK_DURATION, "soon", "not an integer"),
        (gc.DELIVERY_COUNT_LIMIT, "11", "outside"),
        (gc.ISOLATION_LEVEL, "dirty", "not one of"),
        (gc.AUTO_OFFSET_RESET, "by_duration:forever", "ISO-8601"),
        (gc.RENEW_ACKNOWLEDGE, "yes", "not one of"),
    ],
)
def test_bad_names_and_values_are_refused_with_the_reason(name, value, why):
    with pytest.raises(gc.GroupConfigError, match=why) as caught:
        gc.validate({name: value}, {})
    assert caught.value.name == name


def test_heartbeat_interval_must_stay_below_the_session_timeout_including_defaults():
    defaults = GroupSettings().as_configs()
    wide = gc.GroupBounds(max_heartbeat_interval_ms=60_000)
    with pytest.raises(gc.GroupConfigError, match="must be below"):
        gc.validate({gc.HEARTBEAT_INTERVAL: "50000"}, {}, defaults, wide)
    changes = {gc.HEARTBEAT_INTERVAL: "50000", gc.SESSION_TIMEOUT: "60000"}
    assert gc.validate(changes, {}, defaults, wide)


@pytest.mark.parametrize(
    ("name", "low", "high", "low_name"),
    [
        (gc.LOCK_DURATION, 15_000, 60_000, "group.share.min.record.lock.duration.ms"),
        (gc.DELIVERY_COUNT_LIMIT, 2, 10, "group.share.min.delivery.count.limit"),
        (gc.MAX_RECORD_LOCKS, 100, 10_000, "group.share.min.partition.max.record.locks"),
        (gc.SESSION_TIMEOUT, 45_000, 60_000, "group.share.min.session.timeout.ms"),
        (gc.HEARTBEAT_INTERVAL, 5_000, 15_000, "group.share.min.heartbeat.interval.ms"),
    ],
)
def test_kafkas_broker_bounds_hold_a_groups_value_and_the_error_names_them(
    name, low, high, low_name
):
    """KIP-1240: a group's value lies within the broker's group.share.min/max.* configs,
    whose defaults are Kafka's; the bounds themselves are the operator's to move."""
    session = {gc.SESSION_TIMEOUT: "60000"}  # so that any allowed heartbeat stays below it
    for fine in (low, high):
        gc.validate({**session, name: str(fine)}, {})
    for wrong in (low - 1, high + 1):
        with pytest.raises(gc.GroupConfigError, match="outside"):
            gc.validate({**session, name: str(wrong)}, {})
    with pytest.raises(gc.GroupConfigError, match=low_name.replace(".min.", ".max.")):
        gc.validate({**session, name: str(high + 1)}, {})
    try:
        gc.DEFINITIONS[name].check(str(low - 1))
    except ValueError:
        return  # below the config's own range: no bound can allow it
    wider = gc.GroupBounds(**{f"min_{gc.BOUNDED[name]}": low - 1})
    gc.validate({**session, name: str(low - 1)}, {}, None, wider)


def test_overrides_apply_over_defaults_and_read_back_as_configs():
    settings = GroupSettings().with_configs(
        {
            gc.LOCK_DURATION: "2000",
            gc.AUTO_OFFSET_RESET: "by_duration:PT1H",
            gc.ISOLATION_LEVEL: "read_committed",
            gc.RENEW_ACKNOWLEDGE: "false",
        }
    )
    assert settings.limits.record_lock_duration_ms == 2000
    assert settings.isolation_level == 1 and settings.renew_acknowledge is False
    configs = settings.as_configs()
    assert configs[gc.AUTO_OFFSET_RESET] == "by_duration:PT3600S"
    assert GroupSettings().with_configs(configs) == settings
    assert set(configs) == set(gc.DEFINITIONS)


def test_lag_counts_everything_not_settled_up_to_the_high_watermark():
    ranges = [
        (100, 104, RecordState.ACKNOWLEDGED),
        (105, 106, RecordState.ACQUIRED),
        (107, 107, RecordState.ARCHIVED),
        (108, 109, RecordState.AVAILABLE),
    ]
    lag = partition_lag(100, 110, ranges, 120)
    assert lag.lag == 20 - 6  # 110-119 unread, 105-106 and 108-109 not settled
    assert lag.in_flight == {
        "available": 2,
        "acquired": 2,
        "acknowledged": 5,
        "archiving": 0,
        "archived": 1,
    }
    assert partition_lag(100, 100, [], 100).lag == 0


def test_a_bound_wider_than_the_hard_range_is_named_clipped_to_it():
    """A group's value is refused naming the one range that accepts it: the node's bounds
    where they are narrower than Kafka's hard range, the hard range where they are wider."""
    wide = gc.GroupBounds(max_session_timeout_ms=10**9)
    with pytest.raises(gc.GroupConfigError, match=r"outside \[45000, 1800000\] \("):
        gc.validate({gc.SESSION_TIMEOUT: str(10**7)}, {}, None, wide)
    gc.validate({gc.SESSION_TIMEOUT: "1800000"}, {}, None, wide)
    with pytest.raises(gc.GroupConfigError, match=r"50 is outside \[2, 10\] \("):
        gc.validate({gc.DELIVERY_COUNT_LIMIT: "50"}, {})
    assert wide.bound(gc.SESSION_TIMEOUT) == gc.Bound(
        45_000,
        1_800_000,
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    )
