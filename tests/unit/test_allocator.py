"""The allocator keeps freed memory for the next big buffers: an upstream frame's buffer of
megabytes comes from the heap, not from a fresh mapping whose every page faults in."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shareproxy.host.allocator import unzeroed_bytearray

# Where an 8 MiB bytearray's bytes lie: in the [heap] mapping, or in a mapping of their own.
_PROBE = """
import ctypes, sys
from shareproxy.host.allocator import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory(64 * 1024 * 1024)
frame = bytearray(8 * 1024 * 1024)
at = ctypes.addressof(ctypes.c_char.from_buffer(frame))
for line in open("/proc/self/maps"):
    span, *rest = line.split()
    low, high = (int(x, 16) for x in span.split("-"))
    if low <= at < high:
        print("heap" if line.rstrip().endswith("[heap]") else "own mapping")
"""


def _where(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_big_buffer_comes_from_the_heap_once_freed_memory_is_kept():
    assert _where("default") == "own mapping"  # glibc's default: mapped, unmapped when freed
    assert _where("kept") == "heap"


def test_a_buffer_left_unzeroed_is_a_writable_bytearray_of_its_size():
    buffer = unzeroed_bytearray(3 * 1024 * 1024)
    assert type(buffer) is bytearray and len(buffer) == 3 * 1024 * 1024
    memoryview(buffer)[-4:] = b"tail"
    assert buffer.endswith(b"tail")
    assert unzeroed_bytearray(0) == bytearray()
    with pytest.raises(ValueError, match="-1 bytes"):
        unzeroed_bytearray(-1)
