"""Record batches as a broker stores them, built byte by byte for the tests that read them."""

from __future__ import annotations

import struct


def varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def batch(
    base: int,
    count: int,
    *,
    pid: int = -1,
    txn: bool = False,
    marker: int | None = None,
    timestamps: tuple[int, int] = (0, 0),
    log_append_time: bool = False,
) -> bytes:
    """A v2 record batch as a broker stores it (CRC left 0: the proxy never checks it);
    ``timestamps``: its base and max timestamps."""
    attrs = (0x10 if txn else 0) | (0x20 if marker is not None else 0)
    attrs |= 0x08 if log_append_time else 0
    records = b""
    for i in range(count):
        key = struct.pack(">hh", 0, marker) if marker is not None else b"k"
        value = b"" if marker is not None else b"v%d" % i
        body = (
            b"\0"
            + varint(0)
            + varint(i)
            + varint(len(key))
            + key
            + varint(len(value))
            + value
            + varint(0)
        )
        records += varint(len(body)) + body
    after_length = (
        struct.pack(">ibIhiqqqhii", 0, 2, 0, attrs, count - 1, *timestamps, pid, 0, 0, count)
        + records
    )
    return struct.pack(">qi", base, len(after_length)) + after_length
