"""A response of any API version that only carries an error, as Kafka's brokers build one
(``AbstractRequest.getErrorResponse``) when a request cannot be handled: every error code
field set, every list empty. The last resort when handling a request failed unexpectedly, so
the client gets an answer and its connection stays usable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import uuid_zero

_ZERO = {
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": b"",
    "uuid": uuid_zero,
    "float64": 0.0,
    "timedelta_i32": timedelta(0),
    "timedelta_i64": timedelta(0),
    "datetime_i64": datetime.fromtimestamp(0, UTC),
}


def error_entity(
    cls: type,
    code: int,
    message: str | None,
    source: Any = None,
    aliases: Mapping[str, str] | None = None,
    fill: Mapping[str, Any] | None = None,
) -> Any:
    """An instance of the kio entity ``cls`` with ``code`` in its error codes, ``message`` in
    its error messages and defaults elsewhere.

    With ``source`` (the request, or one of its entries) the answer mirrors it, as Kafka's
    brokers answer a refused request: every list is the request's list of the same name (or
    the name ``aliases`` gives) with each entry answered, names and indexes copied. A bare
    integer entry (a partition index) answers as ``partition_index``. ``fill`` gives fields of
    any entity in the answer a value other than their zero (an offset of -1)."""
    aliases = aliases or {}
    fill = fill or {}
    values: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        given = _given(source, aliases.get(f.name, f.name))
        if kafka_type == "error_code":
            values[f.name] = KioErrorCode(code)
        elif f.name == "error_message" and kafka_type == "string":
            values[f.name] = message
        elif f.name in fill and isinstance(kind, PrimitiveField):
            values[f.name] = fill[f.name]
        elif isinstance(kind, EntityTupleField) and isinstance(given, tuple | list):
            values[f.name] = tuple(
                error_entity(kind.type_, code, message, item, aliases, fill) for item in given
            )
        elif given is not _NONE and not isinstance(kind, EntityField | EntityTupleField):
            values[f.name] = given
        elif f.default is not MISSING:
            values[f.name] = f.default
        elif isinstance(kind, PrimitiveTupleField | EntityTupleField):
            values[f.name] = ()
        elif is_optional(f) and kafka_type != "records":  # records: empty, as Kafka sends
            values[f.name] = None
        elif isinstance(kind, EntityField):
            values[f.name] = error_entity(kind.type_, code, message, None, aliases, fill)
        elif isinstance(kind, PrimitiveField):
            values[f.name] = _ZERO.get(get_schema_field_type(f), 0)
    return cls(**values)


_NONE = object()


def _given(source: Any, name: str) -> Any:
    if source is None:
        return _NONE
    if isinstance(source, int):  # a partition index in a list of them
        return source if name == "partition_index" else _NONE
    return getattr(source, name, _NONE)


def list_entry_type(cls: type, name: str) -> type:
    """The entity type of the list field ``name`` of the kio entity ``cls``."""
    field = next(f for f in fields(cls) if f.name == name)
    kind = classify_field(field)
    if not isinstance(kind, EntityTupleField):
        raise TypeError(f"{cls.__name__}.{name} is not a list of entities")
    return kind.type_
