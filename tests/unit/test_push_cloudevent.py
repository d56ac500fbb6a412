"""A pushed record is a CloudEvent in HTTP binary content mode: its value is the body, its
place and delivery count are ``ce-`` attributes, its own headers travel beside them, and every
byte comes back as it was (percent-decoding the header values)."""

from __future__ import annotations

from urllib.parse import unquote, unquote_to_bytes

from shareproxy.push.cloudevent import (
    DEFAULT_CONTENT_TYPE,
    RECORD_HEADER_PREFIX,
    PushedRecord,
    attribute,
    http_headers,
)

RECORD = PushedRecord(
    group_id="billing team",
    topic="orders",
    partition=3,
    offset=42,
    timestamp_ms=1_700_000_000_123,
    key="kunde-ö".encode(),
    value=b"\x00binary\xff",
    headers=[
        ("content-type", b"application/json"),
        ("trace id", b'a "quoted" 100%'),
        ("raw", b"\xff\x00"),
        ("empty", None),
    ],
    delivery_count=2,
)


def test_the_attributes_say_where_the_record_is_and_how_often_it_came():
    headers = dict(http_headers(RECORD))
    assert headers["ce-specversion"] == "1.0"
    assert headers["ce-id"] == "orders/3/42"
    assert unquote(headers["ce-source"]) == "/share-groups/billing%20team/topics/orders"
    assert headers["ce-type"] == "dev.shareproxy.record"
    assert headers["ce-time"] == "2023-11-14T22:13:20.123Z"
    assert (headers["ce-kafkatopic"], headers["ce-kafkapartition"]) == ("orders", "3")
    assert (headers["ce-kafkaoffset"], headers["ce-deliverycount"]) == ("42", "2")
    assert unquote(headers["ce-partitionkey"]) == "kunde-ö"
    assert headers["content-type"] == "application/json"


def test_every_header_value_is_printable_ascii_and_decodes_to_the_records_bytes():
    headers = http_headers(RECORD)
    for name, value in headers:
        assert all(0x21 <= ord(c) < 0x7F for c in name + value) or value == "", (name, value)
    own = [(n[len(RECORD_HEADER_PREFIX) :], v) for n, v in headers if n.startswith("kafka-")]
    assert [(unquote(n), unquote_to_bytes(v)) for n, v in own] == [
        ("content-type", b"application/json"),
        ("trace id", b'a "quoted" 100%'),
        ("raw", b"\xff\x00"),
        ("empty", b""),  # a null value arrives empty
    ]
    assert attribute('a "b" 5%') == "a%20%22b%22%205%25"


def test_a_record_without_a_text_key_a_timestamp_or_a_content_type_leaves_them_out():
    bare = PushedRecord("g", "t", 0, 0, -1, b"\xff\xfe", None, [("content-type", b"\x01")], 1)
    headers = dict(http_headers(bare))
    assert "ce-time" not in headers and "ce-partitionkey" not in headers
    assert headers["content-type"] == DEFAULT_CONTENT_TYPE  # its own is not a header value


def test_a_timestamp_no_date_holds_and_a_spaced_content_type_still_make_a_request():
    """What HTTP or the calendar cannot carry is left out or trimmed, never a failed push."""
    odd = PushedRecord("g", "t", 0, 1, 10**17, None, b"", [("content-type", b" text/plain ")], 1)
    headers = dict(http_headers(odd))
    assert "ce-time" not in headers
    assert headers["content-type"] == "text/plain"
    blank = PushedRecord("g", "t", 0, 1, 0, None, b"", [("content-type", b"   ")], 1)
    assert dict(http_headers(blank))["content-type"] == DEFAULT_CONTENT_TYPE
