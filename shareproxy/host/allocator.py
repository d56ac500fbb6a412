"""glibc's allocator told to keep the memory a node frees for its next allocations.

A node receives upstream Fetch responses of megabytes each into buffers of their own size
(``upstream/frame_protocol.py``). glibc serves an allocation that big with a fresh ``mmap`` and
unmaps it when it is freed (its threshold rises only to the largest size freed so far, and
sizes vary), and it gives the heap's free top back to the system: each new frame then faults in
every 4 KiB page it is received into, which on a virtual machine costs more than receiving the
bytes (4-5% of a node's CPU in a drain). With big allocations taken from the heap and its free
top kept up to the log cache's bound, the frames freed are the memory the next ones use; the
node's resident memory then stays near its peak rather than falling back after one. Such a
buffer is also left unzeroed, as the kernel fills it whole before anything reads it.
"""

from __future__ import annotations

import ctypes
import platform
from typing import cast

# mallopt(3) parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's upper bound for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2): bigger ones are mapped
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024

# with no source, CPython's C API leaves the new bytearray's bytes as allocated
_new_bytearray = ctypes.pythonapi.PyByteArray_FromStringAndSize
_new_bytearray.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
_new_bytearray.restype = ctypes.py_object


def keep_freed_memory(kept_bytes: int) -> bool:
    """Allocations up to 32 MiB from the heap, and up to ``kept_bytes`` of its free top kept;
    True where the allocator took both (glibc), False where nothing changed (another libc)."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    kept = min(kept_bytes, 2**31 - 1)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, kept)
    )


def unzeroed_bytearray(size: int) -> bytearray:
    """``size`` bytes as the allocator hands them over, for a buffer filled whole before it is
    read: ``bytearray(size)`` zeroes them first, ~0.3 ms of CPU for a 3 MiB response."""
    if size < 0:
        raise ValueError(f"a buffer of {size} bytes")
    return cast(bytearray, _new_bytearray(None, size))
