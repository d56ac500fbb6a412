"""One record as a CloudEvent in HTTP binary content mode (the CloudEvents 1.0 HTTP binding,
with the Kafka binding's attributes): the body is the record's value, bytes as they are; the
event's attributes are ``ce-`` headers; the record's own headers travel as
``kafka-header-{name}`` headers. What a push POSTs for each record.

Header values are percent-encoded as the CloudEvents HTTP binding asks (a space, ``"``, ``%``
and every byte outside printable ASCII as ``%XX`` of its UTF-8, or of its bytes for a record
header's value, which need not be text), so that any record travels losslessly:
``urllib.parse.unquote_to_bytes`` gives a value back. A record header's name is encoded the
same way where HTTP does not allow a character in a name; HTTP does not keep a name's case.
A record header whose value is null arrives empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

SPEC_VERSION = "1.0"
EVENT_TYPE = "dev.shareproxy.record"
RECORD_HEADER_PREFIX = "kafka-header-"
DEFAULT_CONTENT_TYPE = "application/octet-stream"
# the bytes a CloudEvents attribute value keeps as they are: printable ASCII but '"' and '%'
_VALUE_SAFE = frozenset(range(0x21, 0x7F)) - {ord('"'), ord("%")}
# the bytes an HTTP field name may hold (RFC 9110 tchar), but '%', which encodes the others
_NAME_SAFE = frozenset(
    b"!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


@dataclass(frozen=True, slots=True)
class PushedRecord:
    """A record as the pusher has it: where it is, what it holds, how often it was delivered."""

    group_id: str
    topic: str
    partition: int
    offset: int
    timestamp_ms: int  # -1: the record has none
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]
    delivery_count: int


def _encoded(data: bytes, safe: frozenset[int]) -> str:
    return "".join(chr(b) if b in safe else f"%{b:02X}" for b in data)


def attribute(value: str) -> str:
    """A CloudEvents string attribute as an HTTP header value."""
    return _encoded(value.encode(), _VALUE_SAFE)


def _text(data: bytes | None) -> str | None:
    """The bytes as text, when they are UTF-8."""
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _content_type(headers: Sequence[tuple[str, bytes | None]]) -> str:
    """The record's own content-type header when it is a valid header value (the last one)."""
    for name, value in reversed(headers):
        if name.lower() == "content-type" and value and all(0x20 <= b < 0x7F for b in value):
            # HTTP refuses a value with space around it; one that is only space is none
            return value.decode("ascii").strip() or DEFAULT_CONTENT_TYPE
    return DEFAULT_CONTENT_TYPE


def _time(timestamp_ms: int) -> str | None:
    """The record's timestamp as RFC 3339; None for none (-1) or one no date holds."""
    if timestamp_ms < 0:
        return None
    try:
        when = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    except (ValueError, OverflowError, OSError):  # past year 9999
        return None
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def source(group_id: str, topic: str) -> str:
    """The event's source: the share group and the topic it consumes (a URI reference)."""
    return f"/share-groups/{quote(group_id, safe='')}/topics/{topic}"


def http_headers(record: PushedRecord) -> list[tuple[str, str]]:
    """The request's headers for ``record`` (its body is ``record.value``)."""
    headers = [
        ("ce-specversion", SPEC_VERSION),
        ("ce-id", attribute(f"{record.topic}/{record.partition}/{record.offset}")),
        ("ce-source", attribute(source(record.group_id, record.topic))),
        ("ce-type", EVENT_TYPE),
    ]
    time = _time(record.timestamp_ms)
    if time is not None:
        headers.append(("ce-time", time))
    headers += [
        ("ce-kafkatopic", attribute(record.topic)),
        ("ce-kafkapartition", str(record.partition)),
        ("ce-kafkaoffset", str(record.offset)),
        ("ce-deliverycount", str(record.delivery_count)),
    ]
    key = _text(record.key)
    if key is not None:
        headers.append(("ce-partitionkey", attribute(key)))
    headers.append(("content-type", _content_type(record.headers)))
    for name, value in record.headers:
        encoded_name = _encoded(name.encode(), _NAME_SAFE)
        headers.append((RECORD_HEADER_PREFIX + encoded_name, _encoded(value or b"", _VALUE_SAFE)))
    return headers
