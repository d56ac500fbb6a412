"""kio's types as the proxy uses them: its schema classes, and plain values typed as its
field types for the entities the proxy builds.

kio declares a payload's header schema as a property of its protocol (so each payload may
narrow it), which reads as a function, not a class, off the class itself; ``KioPayloadSchema``
states what the proxy reads off a schema class.

kio types its fields with phantom types (``i32``, ``TopicName``, ``i32Timedelta``, …): subtypes
of ``int``, ``str`` and ``timedelta`` that a value becomes by being parsed, which checks its
bounds. The values the proxy puts in an entity already fit (partition indexes, epochs, names it
read from a request or validated), so these helpers only tell the type checker: a cast, no
parse and no cost per field.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any, ClassVar, Protocol, cast

from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64


class KioSchema(Protocol):
    """A kio schema class (a payload, a header or a nested entity): a dataclass."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    __flexible__: ClassVar[bool]

    def __init__(self, **fields: Any) -> None: ...


class KioPayloadSchema(KioSchema, Protocol):
    """A kio request or response class."""

    __api_key__: ClassVar[int]
    __version__: ClassVar[int]
    __header_schema__: ClassVar[type[KioSchema]]


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
