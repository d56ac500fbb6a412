"""Previews of archived records' keys and values: bounded text, or the size of binary data."""

from __future__ import annotations

from shareproxy.core.record_preview import PREVIEW_CHARS, preview


def test_null_short_and_cut_text():
    assert preview(None) is None
    assert preview(b"") == ""
    assert preview("héllo <b>".encode()) == "héllo <b>"
    assert preview(b"x" * PREVIEW_CHARS) == "x" * PREVIEW_CHARS
    assert preview(b"x" * (PREVIEW_CHARS + 1)) == "x" * PREVIEW_CHARS + "…"
    assert preview(b"y" * 10_000) == "y" * PREVIEW_CHARS + "…"


def test_a_cut_inside_a_character_is_still_text():
    long = ("€" * 1000).encode()  # three bytes each: the head ends inside one
    assert preview(long) == "€" * PREVIEW_CHARS + "…"


def test_bytes_that_are_not_utf8_show_only_their_size():
    assert preview(b"\xff\x00\x01") == "(binary, 3 bytes)"
    assert preview(b"ok" + b"\xc3" * 5000) == "(binary, 5002 bytes)"
