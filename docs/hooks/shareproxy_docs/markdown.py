"""Text from the code (docstrings, help, descriptions) made safe to place in Markdown: it is
prose that may hold ``<NAME>``, ``{group_id}`` or a ``|``, which Markdown would otherwise read as
HTML, attributes or a table's cells. Code spans written in it (``like this``) are kept."""

from __future__ import annotations

import html
import re

_CODE_SPAN = re.compile(r"(``.+?``|`[^`\n]+`)")
_SIGNIFICANT = re.compile(r"([\\*_\[\]{}|#])")


def text(value: str) -> str:
    """Prose from the code, as Markdown that shows it as written."""
    parts = _CODE_SPAN.split(value)
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = _SIGNIFICANT.sub(r"\\\1", html.escape(parts[i], quote=False))
    return "".join(parts)


def cell(value: str) -> str:
    """Prose for one table cell, on one line (a pipe in a code span is no cell's edge)."""
    return " ".join(text(value).split())


def code(value: str) -> str:
    """A code span holding ``value`` exactly, whatever backticks it has."""
    ticks = max((len(run) for run in re.findall(r"`+", value)), default=0) + 1
    fence = "`" * ticks
    padded = f" {value} " if value.startswith("`") or value.endswith("`") else value
    return f"{fence}{padded}{fence}"


def generated_from(sources: str) -> str:
    """The line every generated page starts with."""
    return f"*Generated when the site is built, from {sources}.*\n"
