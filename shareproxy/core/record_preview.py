"""A record's key or value as an operator may glance at it: text cut to a bound, or, for bytes
that are not UTF-8, only their size, so a listing never carries a whole payload."""

from __future__ import annotations

PREVIEW_CHARS = 120  # characters of a key or value shown, "…" after when cut
PREVIEW_RANGES_MAX = 100  # archived ranges per listing whose first record is read for a preview
_HEAD_BYTES = PREVIEW_CHARS * 4  # enough bytes for PREVIEW_CHARS characters of UTF-8


def preview(data: bytes | None) -> str | None:
    """None for a null key or value; its text, cut at PREVIEW_CHARS with "…"; or
    "(binary, N bytes)" when its first bytes are not UTF-8."""
    if data is None:
        return None
    head = bytes(data[:_HEAD_BYTES])
    try:
        text = head.decode()
    except UnicodeDecodeError as exc:
        if len(data) <= _HEAD_BYTES or exc.start < len(head) - 3:
            return f"(binary, {len(data)} bytes)"
        text = head[: exc.start].decode()  # the cut split a character
    if len(text) > PREVIEW_CHARS or len(data) > len(head):
        return text[:PREVIEW_CHARS] + "…"
    return text
