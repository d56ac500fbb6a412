"""The serve settings that are group configs' proxy-wide defaults and the bounds a group's own
values must keep (Kafka's group.share.min/max.*), checked together by ``core.group_config``'s
rules, so ``serve`` takes exactly the values ``groups config`` takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import fields
from typing import Any

from pydantic import Field

from shareproxy.core import group_config as gc

# serve settings that are the proxy-wide defaults of group configs
GROUP_DEFAULTS = {
    "record_lock_duration_ms": gc.LOCK_DURATION,
    "delivery_count_limit": gc.DELIVERY_COUNT_LIMIT,
    "partition_max_record_locks": gc.MAX_RECORD_LOCKS,
    "auto_offset_reset": gc.AUTO_OFFSET_RESET,
    "isolation_level": gc.ISOLATION_LEVEL,
    "session_timeout_ms": gc.SESSION_TIMEOUT,
    "heartbeat_interval_ms": gc.HEARTBEAT_INTERVAL,
    "renew_acknowledge": gc.RENEW_ACKNOWLEDGE,
    "redelivery_backoff_initial_ms": gc.BACKOFF_INITIAL,
    "redelivery_backoff_multiplier": gc.BACKOFF_MULTIPLIER,
    "redelivery_backoff_max_ms": gc.BACKOFF_MAX,
    "fair_acquisition": gc.FAIR_ACQUISITION,
    "key_ordering": gc.KEY_ORDERING,
    "dead_letter_topic": gc.DLQ_TOPIC,
    "dead_letter_copy": gc.DLQ_COPY,
    "delivery_delay_ms": gc.DELIVERY_DELAY,
    "max_delivery_delay_ms": gc.MAX_DELIVERY_DELAY,
    "deliver_at_header": gc.DELIVER_AT_HEADER,
}


def group_default(name: str) -> Any:
    """The setting for group config ``name``'s default: its type, default and doc."""
    d = gc.DEFINITIONS[name]
    parsers: dict[str, Callable[[str], Any]] = {
        "int": int,
        "double": float,
        "boolean": lambda v: v == "true",
    }
    value: Any = parsers.get(d.kind, str)(d.default)
    return Field(default=value, description=f"default {name}: {d.doc}")


def bound(field_name: str, low: int, high: int | None) -> Any:
    """The setting for a ``gc.GroupBounds`` field, within what Kafka lets it be."""
    name = "group.share." + field_name.replace("_", ".")
    kind = "least" if field_name.startswith("min_") else "most"
    stem = field_name[4:].replace("_", ".")
    return Field(
        default=getattr(gc.KAFKA_BOUNDS, field_name),
        ge=low,
        le=high,
        description=f"{name}: the {kind} a group's share.{stem} may be",
    )


def config_text(value: Any) -> str:
    """A setting's value as a group config writes it."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def defaults_problem(
    configs: Mapping[str, str], bounds: gc.GroupBounds, given: Set[str]
) -> tuple[str, str] | None:
    """What is wrong with the defaults and bounds taken together, blamed on one setting (the
    one ``given`` where two disagree), or None."""
    for f in fields(gc.GroupBounds):
        if f.name.startswith("min_"):
            stem = f.name[4:]
            low, high = getattr(bounds, f.name), getattr(bounds, "max_" + stem)
            if low > high:
                return (
                    "group_share_min_" + stem,
                    f"{low} is above group.share.max.{stem.replace('_', '.')} ({high})",
                )
    for setting, name in GROUP_DEFAULTS.items():
        try:
            gc.check(name, configs[name], bounds)
        except gc.GroupConfigError as exc:
            if name == gc.DLQ_TOPIC and "errors_deadletterqueue_topic_name_prefix" in given:
                setting = "errors_deadletterqueue_topic_name_prefix"
            return setting, str(exc).partition(": ")[2]
    try:
        gc.check_heartbeat(configs)
    except gc.GroupConfigError:
        if "heartbeat_interval_ms" in given:
            return (
                "heartbeat_interval_ms",
                f"must be below the session timeout ({configs[gc.SESSION_TIMEOUT]} ms)",
            )
        return (
            "session_timeout_ms",
            f"must be above the heartbeat interval ({configs[gc.HEARTBEAT_INTERVAL]} ms)",
        )
    try:
        gc.check_backoff(configs)
    except gc.GroupConfigError:
        if "redelivery_backoff_max_ms" in given:
            return (
                "redelivery_backoff_max_ms",
                f"must not be below the initial back-off ({configs[gc.BACKOFF_INITIAL]} ms)",
            )
        return (
            "redelivery_backoff_initial_ms",
            f"must not be above the longest back-off ({configs[gc.BACKOFF_MAX]} ms)",
        )
    return None
