"""What a Fetch brings back from upstream, its record batches left as views into the frame.

kio's reader copies every partition's records out of the response frame; the proxy only slices
them into batches and passes them on, so the Fetch v12 response the proxy asks for is read here
instead: the fixed fields with ``struct``, the records as a ``memoryview`` of the frame (one
copy fewer per byte fetched). ``tests/unit/test_upstream_fetched.py`` checks it against kio.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

from kio.schema.fetch.v12 import response as fetch_resp

_PARTITION = struct.Struct(">ihqqq")  # index, error code, high watermark, LSO, log start
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_I32 = struct.Struct(">i")
_TOP = struct.Struct(">ihi")  # throttle time, error code, session id


@dataclass(slots=True)
class PartitionData:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview  # the record batches as fetched (a view: no copy)
    aborted: list[tuple[int, int]] = field(default_factory=list)  # (producer id, first offset)


Fetched = list[tuple[str, int, PartitionData]]  # (topic, partition, data) in response order


def _uvarint(buf: bytes | memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _skip_tags(buf: bytes | memoryview, at: int) -> int:
    count, at = _uvarint(buf, at)
    for _ in range(count):
        _, at = _uvarint(buf, at)
        size, at = _uvarint(buf, at)
        at += size
    return at


def read_fetch_response(frame: bytes | memoryview, at: int) -> tuple[int, Fetched]:
    """The response's top-level error code and every partition's data, from a Fetch v12
    response body starting at ``at`` in ``frame``; raises on a truncated frame."""
    view = memoryview(frame)
    _, error_code, _ = _TOP.unpack_from(frame, at)
    at += _TOP.size
    out: Fetched = []
    topics, at = _uvarint(frame, at)
    for _ in range(topics - 1):
        size, at = _uvarint(frame, at)
        end = at + size - 1
        if end > len(frame):
            raise ValueError("truncated Fetch response")
        topic = str(frame[at:end], "utf-8")
        at = end
        partitions, at = _uvarint(frame, at)
        for _ in range(partitions - 1):
            index, code, hwm, lso, start = _PARTITION.unpack_from(frame, at)
            at += _PARTITION.size
            count, at = _uvarint(frame, at)
            aborted = []
            for _ in range(count - 1):
                aborted.append(_ABORTED.unpack_from(frame, at))
                at = _skip_tags(frame, at + _ABORTED.size)
            at += _I32.size  # preferred read replica
            size, at = _uvarint(frame, at)
            records: bytes | memoryview = b""
            if size:
                end = at + size - 1
                if end > len(frame):
                    raise ValueError("truncated Fetch response")
                records, at = view[at:end], end
            at = _skip_tags(frame, at)
            out.append((topic, index, PartitionData(code, hwm, lso, start, records, aborted)))
        at = _skip_tags(frame, at)
    _skip_tags(frame, at)
    return error_code, out


class FetchViews:
    """A response type for aiokafka's connection (``decode`` of the body after the header)."""

    __slots__ = ()
    cls = fetch_resp.FetchResponse  # its header schema is read before the body

    def decode(self, data: io.BytesIO) -> Fetched:
        # getvalue() of an unmodified BytesIO is the bytes it was made from: no copy
        _, fetched = read_fetch_response(data.getvalue(), data.tell())
        return fetched

    def decode_frame(self, frame: memoryview, at: int) -> Fetched:
        """The body from ``at`` in a frame (a read-only view: a big one's own buffer, or a
        small one's bytes)."""
        return read_fetch_response(frame, at)[1]
