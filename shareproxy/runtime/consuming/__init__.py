"""Consuming: share-partition leaders, the partitions a node leads, reading ahead from the
upstream cluster, acknowledgement and group commit. The face is ``ShareConsumers``, the use cases
every way of consuming calls (ShareFetch, ShareAcknowledge, the HTTP records API)."""

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
    "Acquisition",
    "FetchLimits",
    "Fetched",
    "NamedTopic",
    "SessionRequest",
    "ShareConsumers",
    "TopicPartition",
]
