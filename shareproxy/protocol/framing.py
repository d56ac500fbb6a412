"""Kafka's size-prefixed framing: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations

import struct

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent something that is not a Kafka frame; the connection must be closed."""


class FrameDecoder:
    """Feed bytes as they arrive; take whole frames out."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """One whole frame, or None until more bytes arrive. Raises FrameError."""
        buf = self._buffer
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameError(f"frame of {size} bytes (limit {self.max_frame_bytes})")
        if len(buf) < 4 + size:
            return None
        frame = bytes(buf[4 : 4 + size])
        del buf[: 4 + size]
        return frame


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
