"""Building kio responses: one call for every version of a schema, and the envelopes and
entries several handlers share."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

from kio.schema.errors import ErrorCode as KioErrorCode

T = TypeVar("T")


def build(cls: type[T], **fields: Any) -> T:
    """Construct a kio entity of any version from the fields that version has."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in fields.items() if k in names})


def schema_module(cls: type) -> Any:
    """The kio module holding ``cls`` and its nested entity types (same API version)."""
    return sys.modules[cls.__module__]


def by_topic(
    partitions: Iterable[tuple[UUID, int]], make: Callable[[tuple[UUID, int]], T]
) -> dict[UUID, list[T]]:
    """Per-partition response entries grouped by topic id, in a stable order."""
    grouped: dict[UUID, list[T]] = {}
    for tp in sorted(set(partitions), key=lambda x: (str(x[0]), x[1])):
        grouped.setdefault(tp[0], []).append(make(tp))
    return grouped


def share_response(
    cls: type[T],
    topic_cls: type,
    topics: dict[UUID, list[Any]],
    lock_timeout: timedelta,
    code: int = 0,
    message: str | None = None,
    node_endpoints: tuple = (),
) -> T:
    """The envelope ShareFetch and ShareAcknowledge responses share."""
    return build(
        cls,
        throttle_time=timedelta(0),
        error_code=error(code),
        error_message=message,
        acquisition_lock_timeout=lock_timeout,
        responses=tuple(topic_cls(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
        node_endpoints=node_endpoints,
    )


def node_endpoints(cls: type[T], endpoints: Iterable[tuple[int, str, int]]) -> tuple[T, ...]:
    """KIP-951's NodeEndpoints entries from (node id, host, port)."""
    return tuple(
        build(cls, node_id=node_id, host=host, port=port, rack=None)
        for node_id, host, port in endpoints
    )


def error(code: int) -> KioErrorCode:
    return KioErrorCode(int(code))


__all__ = [
    "build",
    "by_topic",
    "error",
    "node_endpoints",
    "schema_module",
    "share_response",
]
