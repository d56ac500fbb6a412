"""Upstream frames received straight into their own buffers.

A transport with a plain protocol reads into the event loop's buffer and copies each read into
a new ``bytes``; a frame over many reads is then joined, a second copy. A Fetch response is
megabytes of record batches the proxy only passes on, so ``FrameProtocol`` (an asyncio
``BufferedProtocol``, which uvloop and asyncio both let a transport switch to) has the kernel
write a big frame into a buffer of the frame's size, and hands it on as a read-only view:
no copy in user space. Small frames (most answers but Fetch) are read into a scratch buffer and
copied out as ``bytes``, once, as before.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Protocol

from shareproxy.host.allocator import unzeroed_bytearray

SCRATCH_BYTES = 64 * 1024  # a frame that fits is copied out of it; a bigger one gets its own
_SIZE = struct.Struct(">i")


class FrameSink(Protocol):
    """Where the frames go (``frames.FrameReader``)."""

    def feed_data(self, data: bytes | bytearray | memoryview) -> None: ...

    def feed_frame(self, header: bytes, frame: bytes | memoryview) -> None: ...


class FrameProtocol(asyncio.BufferedProtocol):
    """Cuts the received stream into frames for a ``FrameReader``; everything else a transport
    tells a protocol goes to the protocol it replaced (aiokafka's, whose writer and close
    future depend on it)."""

    def __init__(self, replaced: asyncio.Protocol, reader: FrameSink) -> None:
        self._replaced = replaced
        self._reader = reader
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._used = 0  # bytes in the scratch buffer not yet cut into frames
        self._frame: bytearray | None = None  # the big frame being received
        self._frame_view = memoryview(b"")
        self._header = b""
        self._filled = 0
        self._broken = False  # a negative size was passed on: the reader fails, the rest waits

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return self._frame_view[self._filled :]
        return self._scratch_view[self._used :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                frame, self._frame = self._frame_view.toreadonly(), None
                self._frame_view = memoryview(b"")
                self._reader.feed_frame(self._header, frame)
            return
        self._used += nbytes
        self._cut()

    def _cut(self) -> None:
        """Frames whole in the scratch buffer go on as ``bytes``; a frame too big for it
        starts its own buffer; what is left moves to the front."""
        scratch, used, at = self._scratch, self._used, 0
        while not self._broken and used - at >= 4:
            (size,) = _SIZE.unpack_from(scratch, at)
            end = at + 4 + size
            if size < 0:  # passed on as received, for readexactly to refuse
                self._reader.feed_data(scratch[at : at + 4])
                self._broken = True
                at = used
                break
            if end <= used:
                self._reader.feed_frame(bytes(scratch[at : at + 4]), bytes(scratch[at + 4 : end]))
            elif 4 + size > len(scratch):
                self._header = bytes(scratch[at : at + 4])
                self._frame = unzeroed_bytearray(size)  # the kernel fills it whole
                self._frame_view = memoryview(self._frame)
                self._filled = used - at - 4
                self._frame_view[: self._filled] = scratch[at + 4 : used]
                at = used
                break
            else:
                break  # a small frame not all here yet
            at = end
        if self._broken:
            at = used
        if at:
            scratch[: used - at] = scratch[at:used]
            self._used = used - at

    def eof_received(self) -> bool | None:
        return self._replaced.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._replaced.connection_lost(exc)

    def pause_writing(self) -> None:
        self._replaced.pause_writing()

    def resume_writing(self) -> None:
        self._replaced.resume_writing()
