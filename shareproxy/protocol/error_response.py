"""A response of any API version that only carries an error, as Kafka's brokers build one
(``AbstractRequest.getErrorResponse``) when a request cannot be handled: every error code
field set, every list empty. The last resort when handling a request failed unexpectedly, so
the client gets an answer and its connection stays usable."""

from __future__ import annotations

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


def error_entity(cls: type, code: int, message: str | None) -> Any:
    """An instance of the kio entity ``cls`` with ``code`` in its error codes, ``message`` in
    its error messages and defaults elsewhere."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type == "error_code":
            values[f.name] = KioErrorCode(code)
        elif f.name == "error_message" and kafka_type == "string":
            values[f.name] = message
        elif f.default is not MISSING:
            values[f.name] = f.default
        elif isinstance(kind, PrimitiveTupleField | EntityTupleField):
            values[f.name] = ()
        elif is_optional(f):
            values[f.name] = None
        elif isinstance(kind, EntityField):
            values[f.name] = error_entity(kind.type_, code, message)
        elif isinstance(kind, PrimitiveField):
            values[f.name] = _ZERO.get(get_schema_field_type(f), 0)
    return cls(**values)
