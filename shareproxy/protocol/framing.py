"""Kafka's size-prefixed framing: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations

import struct

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
# Before a connection has authenticated, only the SASL exchange is read: Kafka's
# sasl.server.max.receive.size bounds those frames the same way.
MAX_UNAUTHENTICATED_FRAME_BYTES = 512 * 1024
PREFIX_BYTES = 4
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent something that is not a Kafka frame; the connection must be closed."""


def frame_size(prefix: bytes, limit: int) -> int:
    """The length a frame's 4-byte prefix announces, if within ``limit``; else FrameError."""
    (size,) = _SIZE.unpack(prefix)
    if size < 0 or size > limit:
        raise FrameError(f"frame of {size} bytes (limit {limit})")
    return size
