"""Dynamic share-group configs (KIP-932's GROUP resource): names, defaults, bounds, validation.

Stored as strings, as Kafka's IncrementalAlterConfigs carries them; a group's value overrides the
proxy-wide default from ``serve``, whose settings are validated by this same module, so a value
``serve`` takes a group takes too. Each definition has an absolute range; the integer configs are
further bounded by ``GroupBounds``, the proxy-level minimum and maximum Kafka's brokers set with
their ``group.share.min.*`` / ``group.share.max.*`` configs (KIP-1240), with Kafka's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shareproxy.core.dead_letter import DEFAULT_TOPIC_PREFIX, topic_problem
from shareproxy.core.errors import ShareError
from shareproxy.core.offset_reset import parse_auto_offset_reset
from shareproxy.core.schedule import DEFAULT_MAX_DELAY_MS

_YEAR_MS = 365 * 24 * 3600 * 1000

LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
MAX_RECORD_LOCKS = "share.partition.max.record.locks"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
RENEW_ACKNOWLEDGE = "share.renew.acknowledge.enable"
# beyond KIP-932: the redelivery back-off (core.backoff)
BACKOFF_INITIAL = "share.redelivery.backoff.initial.ms"
BACKOFF_MULTIPLIER = "share.redelivery.backoff.multiplier"
BACKOFF_MAX = "share.redelivery.backoff.max.ms"
# KIP-1191's dead-letter topic (core.dead_letter)
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_COPY = "errors.deadletterqueue.copy.record.enable"
# beyond KIP-932: fair work when members share a partition (SharePartition.acquire's sharers)
FAIR_ACQUISITION = "share.fair.acquisition.enable"
# beyond KIP-932: key-ordered share delivery (core.key_order)
KEY_ORDERING = "share.key.ordering.enable"
# beyond KIP-932: scheduled delivery and delay queues (core.schedule)
DELIVERY_DELAY = "share.delivery.delay.ms"
MAX_DELIVERY_DELAY = "share.delivery.max.delay.ms"
DELIVER_AT_HEADER = "share.delivery.header.enable"


class GroupConfigError(ValueError):
    """A config name or value the proxy does not accept (Kafka's INVALID_CONFIG)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    kind: str  # "int", "double", "string", "boolean" (as DescribeConfigs reports types)
    doc: str
    check: Callable[[str], None]
    default: str  # the proxy-wide default unless ``serve`` is given another


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an integer") from None


@dataclass(frozen=True, slots=True)
class IntBetween:
    """An integer config's hard range (Kafka's own), which a node's bounds narrow further."""

    low: int
    high: int

    def __call__(self, value: str) -> None:
        n = _integer(value)
        if not self.low <= n <= self.high:
            raise ValueError(f"{n} is outside [{self.low}, {self.high}]")


def _number_between(low: float, high: float) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            x = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if not low <= x <= high:  # NaN fails too
            raise ValueError(f"{value} is outside [{low:g}, {high:g}]")

    return check


def _dead_letter_topic(value: str) -> None:
    problem = topic_problem(value, "")  # the prefix is the node's: GroupBounds
    if problem is not None:
        raise ValueError(f"{value!r} {problem}")


def _one_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")

    return check


def _offset_reset(value: str) -> None:
    try:
        parse_auto_offset_reset(value)
    except ShareError as exc:
        raise ValueError(exc.message) from None


DEFINITIONS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef(
            LOCK_DURATION,
            "int",
            "how long acquired records stay locked to a consumer before they are released",
            IntBetween(1_000, 3_600_000),
            "30000",
        ),
        ConfigDef(
            DELIVERY_COUNT_LIMIT,
            "int",
            "deliveries before a record is archived instead of redelivered",
            IntBetween(2, 25),
            "5",
        ),
        ConfigDef(
            MAX_RECORD_LOCKS,
            "int",
            "in-flight (acquired) records per share-partition",
            IntBetween(100, 100_000),
            "2000",
        ),
        ConfigDef(
            AUTO_OFFSET_RESET,
            "string",
            "where a share-partition without state starts: earliest, latest or "
            "by_duration:<ISO-8601 duration>",
            _offset_reset,
            "latest",
        ),
        ConfigDef(
            ISOLATION_LEVEL,
            "string",
            "read_committed delivers only committed transactional records",
            _one_of("read_uncommitted", "read_committed"),
            "read_uncommitted",
        ),
        ConfigDef(
            SESSION_TIMEOUT,
            "int",
            "a member that does not heartbeat for this long is removed and its locks released",
            IntBetween(1_000, 1_800_000),
            "45000",
        ),
        ConfigDef(
            HEARTBEAT_INTERVAL,
            "int",
            "how often members heartbeat",
            IntBetween(100, 300_000),
            "5000",
        ),
        ConfigDef(
            RENEW_ACKNOWLEDGE,
            "boolean",
            "whether consumers may renew their acquisition locks (acknowledge type Renew)",
            _one_of("true", "false"),
            "true",
        ),
        ConfigDef(
            BACKOFF_INITIAL,
            "int",
            "how long a record whose lock ended without acceptance waits before it is "
            "delivered again, after its first delivery (0: at once, as in Kafka)",
            IntBetween(0, 3_600_000),
            "0",
        ),
        ConfigDef(
            BACKOFF_MULTIPLIER,
            "double",
            "how much the redelivery back-off grows with each further delivery",
            _number_between(1.0, 10.0),
            "2.0",
        ),
        ConfigDef(
            BACKOFF_MAX,
            "int",
            "the longest redelivery back-off; not below share.redelivery.backoff.initial.ms",
            IntBetween(0, 3_600_000),
            "60000",
        ),
        ConfigDef(
            DLQ_TOPIC,
            "string",
            "the topic a record rejected or at the delivery count limit is written to before it "
            "is archived (empty: none; its name starts with errors.deadletterqueue.topic.name."
            "prefix, and it exists upstream with errors.deadletterqueue.group.enable=true)",
            _dead_letter_topic,
            "",
        ),
        ConfigDef(
            DLQ_COPY,
            "boolean",
            "whether a dead-letter record carries the original key and value (else only the "
            "headers naming where it came from)",
            _one_of("true", "false"),
            "false",
        ),
        ConfigDef(
            FAIR_ACQUISITION,
            "boolean",
            "when several consumers fetch one partition, each fetch takes at most an even share "
            "of what is there and at most max.poll.records, cutting large producer batches, so "
            "no consumer sits idle while another holds a whole batch",
            _one_of("true", "false"),
            "true",
        ),
        ConfigDef(
            KEY_ORDERING,
            "boolean",
            "records with the same key go to one consumer at a time and in offset order (a "
            "record waits while an earlier one of its key is acquired or to be redelivered); "
            "consumers sharing a partition each own a range of keys; records without a key "
            "are unordered",
            _one_of("true", "false"),
            "false",
        ),
        ConfigDef(
            DELIVERY_DELAY,
            "int",
            "how long after its timestamp each record becomes deliverable (0: at once); "
            "a delay queue",
            IntBetween(0, _YEAR_MS),
            "0",
        ),
        ConfigDef(
            MAX_DELIVERY_DELAY,
            "int",
            "the longest a record waits for its delivery time, counted from its timestamp: a "
            "later time is cut to it",
            IntBetween(0, _YEAR_MS),
            str(DEFAULT_MAX_DELAY_MS),
        ),
        ConfigDef(
            DELIVER_AT_HEADER,
            "boolean",
            "whether a record's x-deliver-at header (ms since the epoch, ASCII digits) holds "
            "it back until that time (each record's headers are then read)",
            _one_of("true", "false"),
            "false",
        ),
    )
}
_DEFAULT = {name: d.default for name, d in DEFINITIONS.items()}


@dataclass(frozen=True, slots=True)
class Bound:
    low: int
    high: int
    low_name: str  # the proxy setting under Kafka's broker config name
    high_name: str


@dataclass(frozen=True, slots=True)
class GroupBounds:
    """What the proxy-wide default and every group's value of the bounded configs may be:
    Kafka's broker-level limits, with their defaults. A test or a slow consumer may need a
    1 s lock: the operator lowers ``group.share.min.record.lock.duration.ms``, as on Kafka."""

    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    min_delivery_count_limit: int = 2
    max_delivery_count_limit: int = 10
    min_partition_max_record_locks: int = 100
    max_partition_max_record_locks: int = 10_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    # what every dead-letter topic's name starts with (Kafka's
    # errors.deadletterqueue.topic.name.prefix; empty: any name)
    dead_letter_topic_prefix: str = DEFAULT_TOPIC_PREFIX

    def bound(self, name: str) -> Bound | None:
        """The range a value of ``name`` must be in on this node: its ``group.share.min/max``
        settings clipped to the config's hard range, so the one range named in a refusal is
        the one that accepts a value within it."""
        field_name = BOUNDED.get(name)
        if field_name is None:
            return None
        low, high = f"min_{field_name}", f"max_{field_name}"
        hard = DEFINITIONS[name].check
        assert isinstance(hard, IntBetween)  # every bounded config is an integer one
        return Bound(
            max(getattr(self, low), hard.low),
            min(getattr(self, high), hard.high),
            "group.share." + low.replace("_", "."),
            "group.share." + high.replace("_", "."),
        )


# the bounded group configs -> the stem of their GroupBounds fields
BOUNDED = {
    LOCK_DURATION: "record_lock_duration_ms",
    DELIVERY_COUNT_LIMIT: "delivery_count_limit",
    MAX_RECORD_LOCKS: "partition_max_record_locks",
    SESSION_TIMEOUT: "session_timeout_ms",
    HEARTBEAT_INTERVAL: "heartbeat_interval_ms",
}
KAFKA_BOUNDS = GroupBounds()


def definition(name: str) -> ConfigDef:
    found = DEFINITIONS.get(name)
    if found is None:
        raise GroupConfigError(name, f"unknown group config (known: {', '.join(DEFINITIONS)})")
    return found


def check(name: str, value: str, bounds: GroupBounds | None = None) -> None:
    """GroupConfigError unless ``value`` is a valid value of the config ``name`` (within
    ``bounds`` too, when given)."""
    found = definition(name)
    bound = bounds.bound(name) if bounds is not None else None
    if bound is not None:  # within the node's range, which lies within the hard one
        try:
            n = _integer(value)
        except ValueError as exc:
            raise GroupConfigError(name, str(exc)) from None
        if not bound.low <= n <= bound.high:
            raise GroupConfigError(
                name,
                f"{n} is outside [{bound.low}, {bound.high}] ({bound.low_name}, {bound.high_name})",
            )
        return
    try:
        found.check(value)
    except ValueError as exc:
        raise GroupConfigError(name, str(exc)) from None
    if name == DLQ_TOPIC and bounds is not None:
        problem = topic_problem(value, bounds.dead_letter_topic_prefix)
        if problem is not None:
            raise GroupConfigError(name, f"{value!r} {problem}")


def check_heartbeat(effective: Mapping[str, str]) -> None:
    """The one cross-check: members must heartbeat more often than they time out."""
    if (
        SESSION_TIMEOUT in effective
        and HEARTBEAT_INTERVAL in effective
        and int(effective[HEARTBEAT_INTERVAL]) >= int(effective[SESSION_TIMEOUT])
    ):
        raise GroupConfigError(
            HEARTBEAT_INTERVAL, f"must be below {SESSION_TIMEOUT} ({effective[SESSION_TIMEOUT]})"
        )


def check_backoff(effective: Mapping[str, str]) -> None:
    """A back-off that cannot grow to its initial value is a mistake, not a cap."""
    initial = int(effective.get(BACKOFF_INITIAL, _DEFAULT[BACKOFF_INITIAL]))
    most = int(effective.get(BACKOFF_MAX, _DEFAULT[BACKOFF_MAX]))
    if most < initial:
        raise GroupConfigError(BACKOFF_MAX, f"must not be below {BACKOFF_INITIAL} ({initial})")


def validate(
    changes: Mapping[str, str | None],
    current: Mapping[str, str],
    defaults: Mapping[str, str] | None = None,
    bounds: GroupBounds = KAFKA_BOUNDS,
) -> dict[str, str]:
    """The configs after applying ``changes`` (None removes an override, back to the default).

    Raises GroupConfigError for an unknown name, a value out of bounds (a dead-letter topic
    without the prefix too), or a heartbeat interval not below the session timeout.
    """
    merged = dict(current)
    for name, value in changes.items():
        if value is None:
            definition(name)
            merged.pop(name, None)
        else:
            check(name, value, bounds)
            merged[name] = value
    effective = {**(defaults or {}), **merged}
    check_heartbeat(effective)
    check_backoff(effective)
    return merged
