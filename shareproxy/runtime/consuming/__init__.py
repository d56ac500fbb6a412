"""Consuming: share-partition leaders, the partitions a node leads, reading ahead from the
upstream cluster, acknowledgement and group commit. The face is ``ShareConsumers``, the use cases
every way of consuming calls (ShareFetch, ShareAcknowledge, the HTTP records API, push)."""

from shareproxy.runtime.consuming.acquired_records import AcquiredRecord, records_in
from shareproxy.runtime.consuming.consumers import (
    Acknowledged,
    Acquisition,
    Fetched,
    FetchLimits,
    NamedTopic,
    SessionRequest,
    ShareConsumers,
    TopicPartition,
)

__all__ = [
    "Acknowledged",
    "AcquiredRecord",
    "Acquisition",
    "FetchLimits",
    "Fetched",
    "NamedTopic",
    "SessionRequest",
    "ShareConsumers",
    "TopicPartition",
    "records_in",
]
