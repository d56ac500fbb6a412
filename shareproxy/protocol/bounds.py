"""A size check of a request frame against its kio schema, before kio's native reader sees it.

The native reader trusts the lengths a frame declares: a compact array that claims 2**32
entries makes it allocate tens of gigabytes up front and abort the process. This walk reads
only lengths and null markers, checks each one against the bytes the frame really has, and
refuses nulls where the schema does not allow them (Kafka's own parser refuses those too), so
that decoding afterwards allocates no more than the frame's size and never meets a null where
a handler expects a value. Fixed-size fields are skipped, not read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from shareproxy.protocol.kio_types import KioPayloadSchema, KioSchema

# bytes of each fixed-size Kafka type
_FIXED = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_MAX_VARINT_BYTES = 5  # a 32-bit unsigned varint
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# (frame, offset) -> offset after the value; raises FrameBoundsError
Check = Callable[[memoryview, int], int]


class FrameBoundsError(ValueError):
    """The frame declares more than it holds, or a null the schema forbids."""


def check_request(frame: bytes, offset: int, cls: type[KioPayloadSchema]) -> int:
    """Walk the header and body of a request of kio type ``cls`` from ``offset``; the offset
    where the body ends. Raises FrameBoundsError."""
    view = memoryview(frame)
    offset = _entity_check(cls.__header_schema__)(view, offset)
    return _entity_check(cls)(view, offset)


def _need(frame: memoryview, offset: int, size: int, what: str) -> int:
    end = offset + size
    if size < 0 or end > len(frame):
        raise FrameBoundsError(
            f"{what} of {size} bytes at offset {offset} runs past the frame's {len(frame)} bytes"
        )
    return end


def _uvarint(frame: memoryview, offset: int) -> tuple[int, int]:
    if offset < len(frame):  # most are one byte: lengths, counts, empty tag buffers
        byte = frame[offset]
        if byte < 0x80:
            return byte, offset + 1
    value = shift = 0
    for i in range(_MAX_VARINT_BYTES):
        if offset + i >= len(frame):
            raise FrameBoundsError(f"varint at offset {offset} runs past the frame")
        byte = frame[offset + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset + i + 1
        shift += 7
    raise FrameBoundsError(f"varint at offset {offset} is longer than {_MAX_VARINT_BYTES} bytes")


def _length(frame: memoryview, offset: int, compact: bool, wide: bool) -> tuple[int, int]:
    """(length or -1 for null, offset after the length prefix)."""
    if compact:
        if offset < len(frame) and frame[offset] < 0x80:
            return frame[offset] - 1, offset + 1
        n, offset = _uvarint(frame, offset)
        return n - 1, offset
    fmt = _I32 if wide else _I16
    _need(frame, offset, fmt.size, "length")
    (n,) = fmt.unpack_from(frame, offset)
    if n < -1:
        raise FrameBoundsError(f"negative length {n} at offset {offset}")
    return n, offset + fmt.size


def _fixed(size: int) -> Check:
    def check(frame: memoryview, offset: int) -> int:
        end = offset + size
        if end > len(frame):
            return _need(frame, offset, size, "field")  # raises
        return end

    return check


def _sized(name: str, compact: bool, wide: bool, nullable: bool) -> Check:
    """Strings, bytes and records: a length, then that many bytes."""

    def check(frame: memoryview, offset: int) -> int:
        n, offset = _length(frame, offset, compact, wide)
        if n == -1:
            if not nullable:
                raise FrameBoundsError(f"{name} is null at offset {offset}")
            return offset
        return _need(frame, offset, n, name)

    return check


def _array(name: str, element: Check, compact: bool, nullable: bool, size: int = 0) -> Check:
    """A length, then that many elements; ``size`` > 0 for elements of a fixed size."""

    what = f"array {name}"

    def check(frame: memoryview, offset: int) -> int:
        n, offset = _length(frame, offset, compact, True)
        if n == -1:
            if not nullable:
                raise FrameBoundsError(f"array {name} is null at offset {offset}")
            return offset
        if n > len(frame) - offset:  # every element takes at least one byte
            raise FrameBoundsError(
                f"array {name} claims {n} entries with {len(frame) - offset} bytes left"
            )
        if size:
            return _need(frame, offset, n * size, what)
        for _ in range(n):
            offset = element(frame, offset)
        return offset

    return check


def _nullable_entity(name: str, entity: Check) -> Check:
    def check(frame: memoryview, offset: int) -> int:
        _need(frame, offset, 1, name)
        marker = frame[offset]
        if marker == 0xFF:  # -1: null
            return offset + 1
        if marker != 1:
            raise FrameBoundsError(f"{name} has null marker {marker} at offset {offset}")
        return entity(frame, offset + 1)

    return check


def _primitive(kafka_type: str, name: str, flexible: bool, nullable: bool) -> tuple[Check, int]:
    """The check of one primitive value and its fixed size (0 when it has a length)."""
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type]), _FIXED[kafka_type]
    if kafka_type in ("string", "bytes", "records"):
        return _sized(name, flexible, kafka_type != "string", nullable), 0
    raise FrameBoundsError(f"no size rule for Kafka type {kafka_type!r} of {name}")


@cache
def _entity_check(cls: type[KioSchema]) -> Check:
    flexible = bool(cls.__flexible__)
    header = cls.__name__ == "RequestHeader"
    plain: list[Check | int] = []  # an int: that many bytes of fixed-size fields in a row
    tagged: dict[int, Check] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        optional = tag is None and is_optional(f)
        kind = classify_field(f)
        compact = flexible and not (header and f.name == "client_id")  # always a legacy string
        match kind:
            case PrimitiveField():
                check, size = _primitive(get_schema_field_type(f), f.name, compact, optional)
                if size and tag is None:
                    if plain and isinstance(plain[-1], int):
                        plain[-1] += size
                    else:
                        plain.append(size)
                    continue
            case PrimitiveTupleField():
                element, size = _primitive(get_schema_field_type(f), f.name, compact, False)
                check = _array(f.name, element, compact, optional, size)
            case EntityField(inner):
                check = _entity_check(inner)
                if optional:
                    check = _nullable_entity(f.name, check)
            case EntityTupleField(inner):
                check = _array(f.name, _entity_check(inner), compact, optional)
        if tag is None:
            plain.append(check)
        else:
            tagged[int(tag)] = check

    steps = [_fixed(step) if isinstance(step, int) else step for step in plain]

    def check_entity(frame: memoryview, offset: int) -> int:
        for check in steps:
            offset = check(frame, offset)
        if not flexible:
            return offset
        if offset < len(frame) and not frame[offset]:  # no tagged fields, as nearly always
            return offset + 1
        count, offset = _uvarint(frame, offset)
        if count > len(frame) - offset:
            raise FrameBoundsError(f"{count} tagged fields with {len(frame) - offset} bytes left")
        for _ in range(count):
            tag, offset = _uvarint(frame, offset)
            size, offset = _uvarint(frame, offset)
            end = _need(frame, offset, size, f"tagged field {tag}")
            known = tagged.get(tag)
            if known is not None and known(frame[:end], offset) != end:
                raise FrameBoundsError(f"tagged field {tag} does not fill its {size} bytes")
            offset = end
        return offset

    return check_entity
