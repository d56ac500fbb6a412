"""Plain values typed as kio's field types, for the entities the proxy builds.

kio types its fields with phantom types (``i32``, ``TopicName``, ``i32Timedelta``, …): subtypes
of ``int``, ``str`` and ``timedelta`` that a value becomes by being parsed, which checks its
bounds. The values the proxy puts in an entity already fit (partition indexes, epochs, names it
read from a request or validated), and kio's encoder checks them again, so these helpers only
tell the type checker: a cast, no parse and no cost per field.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import cast

from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

NO_THROTTLE = cast(i32Timedelta, timedelta(0))
"""The throttle time of every answer the proxy makes itself: it never throttles."""


def as_i32(value: int) -> i32:
    return cast(i32, value)


def as_i32s(values: Iterable[int]) -> tuple[i32, ...]:
    return cast("tuple[i32, ...]", tuple(values))


def as_i64(value: int) -> i64:
    return cast(i64, value)


def as_i32_timedelta(value: timedelta) -> i32Timedelta:
    return cast(i32Timedelta, value)


def as_topic_name(name: str) -> TopicName:
    return cast(TopicName, name)


def as_topic_names(names: Iterable[str]) -> tuple[TopicName, ...]:
    return cast("tuple[TopicName, ...]", tuple(names))


def as_group_id(group_id: str) -> GroupId:
    return cast(GroupId, group_id)
