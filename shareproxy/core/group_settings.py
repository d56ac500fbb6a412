"""The configs in force for one share group, typed for the runtime: a group's stored configs
(strings, as ``group_config`` defines and checks them) over the proxy-wide defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shareproxy.core.acquisition import PartitionLimits
from shareproxy.core.assignor import DEFAULT as DEFAULT_ASSIGNOR
from shareproxy.core.backoff import RedeliveryBackoff
from shareproxy.core.group_config import (
    AUTO_OFFSET_RESET,
    BACKOFF_INITIAL,
    BACKOFF_MAX,
    BACKOFF_MULTIPLIER,
    DEFINITIONS,
    DELIVER_AT_HEADER,
    DELIVERY_COUNT_LIMIT,
    DELIVERY_DELAY,
    DLQ_COPY,
    DLQ_TOPIC,
    FAIR_ACQUISITION,
    HEARTBEAT_INTERVAL,
    ISOLATION_LEVEL,
    KEY_ORDERING,
    LOCK_DURATION,
    MAX_DELIVERY_DELAY,
    MAX_RECORD_LOCKS,
    RENEW_ACKNOWLEDGE,
    SESSION_TIMEOUT,
)
from shareproxy.core.offset_reset import AutoOffsetReset, parse_auto_offset_reset
from shareproxy.core.schedule import DeliverySchedule
from shareproxy.core.share_group import DEFAULT_MAX_SIZE

_DEFAULT = {name: d.default for name, d in DEFINITIONS.items()}
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The configs in force for one share group, as the runtime reads them: the defaults are
    the definitions' own; ``serve`` may override them, and a group's stored configs override
    those."""

    record_lock_duration_ms: int = int(_DEFAULT[LOCK_DURATION])
    delivery_count_limit: int = int(_DEFAULT[DELIVERY_COUNT_LIMIT])
    max_record_locks: int = int(_DEFAULT[MAX_RECORD_LOCKS])
    auto_offset_reset: AutoOffsetReset = field(
        default_factory=lambda: parse_auto_offset_reset(_DEFAULT[AUTO_OFFSET_RESET])
    )
    isolation_level: int = _ISOLATION[_DEFAULT[ISOLATION_LEVEL]]  # 1: read_committed
    session_timeout_ms: int = int(_DEFAULT[SESSION_TIMEOUT])
    heartbeat_interval_ms: int = int(_DEFAULT[HEARTBEAT_INTERVAL])
    max_size: int = DEFAULT_MAX_SIZE
    assignor: str = DEFAULT_ASSIGNOR  # node-wide, as Kafka's group.share.assignors
    renew_acknowledge: bool = _DEFAULT[RENEW_ACKNOWLEDGE] == "true"
    redelivery_backoff: RedeliveryBackoff = field(
        default_factory=lambda: RedeliveryBackoff(
            int(_DEFAULT[BACKOFF_INITIAL]),
            float(_DEFAULT[BACKOFF_MULTIPLIER]),
            int(_DEFAULT[BACKOFF_MAX]),
        )
    )
    fair_acquisition: bool = _DEFAULT[FAIR_ACQUISITION] == "true"
    key_ordering: bool = _DEFAULT[KEY_ORDERING] == "true"
    dead_letter_topic: str = _DEFAULT[DLQ_TOPIC]
    dead_letter_copy: bool = _DEFAULT[DLQ_COPY] == "true"
    delivery_delay_ms: int = int(_DEFAULT[DELIVERY_DELAY])
    max_delivery_delay_ms: int = int(_DEFAULT[MAX_DELIVERY_DELAY])
    deliver_at_header: bool = _DEFAULT[DELIVER_AT_HEADER] == "true"

    @property
    def schedule(self) -> DeliverySchedule:
        return DeliverySchedule(
            self.delivery_delay_ms, self.max_delivery_delay_ms, self.deliver_at_header
        )

    @property
    def limits(self) -> PartitionLimits:
        return PartitionLimits(
            self.record_lock_duration_ms,
            self.delivery_count_limit,
            self.max_record_locks,
            self.redelivery_backoff,
            dead_letter=bool(self.dead_letter_topic),
            key_ordered=self.key_ordering,
            schedule=self.schedule,
        )

    def with_configs(self, configs: Mapping[str, str]) -> GroupSettings:
        """These settings (the proxy-wide defaults) overridden by a group's stored configs."""
        changes: dict[str, Any] = {}  # keyword arguments of replace(), by field name
        backoff: dict[str, Any] = {}
        for name, value in configs.items():
            if name == LOCK_DURATION:
                changes["record_lock_duration_ms"] = int(value)
            elif name == DELIVERY_COUNT_LIMIT:
                changes["delivery_count_limit"] = int(value)
            elif name == MAX_RECORD_LOCKS:
                changes["max_record_locks"] = int(value)
            elif name == AUTO_OFFSET_RESET:
                changes["auto_offset_reset"] = parse_auto_offset_reset(value)
            elif name == ISOLATION_LEVEL:
                changes["isolation_level"] = _ISOLATION[value]
            elif name == SESSION_TIMEOUT:
                changes["session_timeout_ms"] = int(value)
            elif name == HEARTBEAT_INTERVAL:
                changes["heartbeat_interval_ms"] = int(value)
            elif name == RENEW_ACKNOWLEDGE:
                changes["renew_acknowledge"] = value == "true"
            elif name == DLQ_TOPIC:
                changes["dead_letter_topic"] = value
            elif name == DLQ_COPY:
                changes["dead_letter_copy"] = value == "true"
            elif name == FAIR_ACQUISITION:
                changes["fair_acquisition"] = value == "true"
            elif name == KEY_ORDERING:
                changes["key_ordering"] = value == "true"
            elif name == DELIVERY_DELAY:
                changes["delivery_delay_ms"] = int(value)
            elif name == MAX_DELIVERY_DELAY:
                changes["max_delivery_delay_ms"] = int(value)
            elif name == DELIVER_AT_HEADER:
                changes["deliver_at_header"] = value == "true"
            elif name == BACKOFF_INITIAL:
                backoff["initial_ms"] = int(value)
            elif name == BACKOFF_MULTIPLIER:
                backoff["multiplier"] = float(value)
            elif name == BACKOFF_MAX:
                backoff["max_ms"] = int(value)
        if backoff:
            changes["redelivery_backoff"] = replace(self.redelivery_backoff, **backoff)
        return replace(self, **changes)

    def as_configs(self) -> dict[str, str]:
        """The same settings under their config names, as strings (DescribeConfigs, REST)."""
        return {
            LOCK_DURATION: str(self.record_lock_duration_ms),
            DELIVERY_COUNT_LIMIT: str(self.delivery_count_limit),
            MAX_RECORD_LOCKS: str(self.max_record_locks),
            AUTO_OFFSET_RESET: str(self.auto_offset_reset),
            ISOLATION_LEVEL: "read_committed" if self.isolation_level else "read_uncommitted",
            SESSION_TIMEOUT: str(self.session_timeout_ms),
            HEARTBEAT_INTERVAL: str(self.heartbeat_interval_ms),
            RENEW_ACKNOWLEDGE: "true" if self.renew_acknowledge else "false",
            BACKOFF_INITIAL: str(self.redelivery_backoff.initial_ms),
            BACKOFF_MULTIPLIER: repr(self.redelivery_backoff.multiplier),
            BACKOFF_MAX: str(self.redelivery_backoff.max_ms),
            FAIR_ACQUISITION: "true" if self.fair_acquisition else "false",
            KEY_ORDERING: "true" if self.key_ordering else "false",
            DLQ_TOPIC: self.dead_letter_topic,
            DLQ_COPY: "true" if self.dead_letter_copy else "false",
            DELIVERY_DELAY: str(self.delivery_delay_ms),
            MAX_DELIVERY_DELAY: str(self.max_delivery_delay_ms),
            DELIVER_AT_HEADER: "true" if self.deliver_at_header else "false",
        }
