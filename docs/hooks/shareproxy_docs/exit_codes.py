"""The exit codes page, from ``shareproxy/host/exits.py``: each code with the comment it is
written with there, and the kinds of failure its table gives that code, with their docstrings
(``core/failures.py``)."""

from __future__ import annotations

import ast
import inspect
import io
import tokenize

from shareproxy.host import exits
from shareproxy_docs.markdown import cell, code, generated_from

SOURCES = "`shareproxy/host/exits.py`, the one table of exit codes"


def codes() -> list[tuple[str, int, str]]:
    """(name, code, what it means) for each module-level integer constant, in order."""
    source = inspect.getsource(exits)
    comments = {
        token.start[0]: token.string.lstrip("# ").strip()
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    found = []
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            name = node.targets[0].id
            found.append((name, getattr(exits, name), comments.get(node.lineno, "")))
    return found


def page() -> str:
    kinds: dict[int, list[str]] = {}
    for kind, value in exits.CODES:
        about = inspect.getdoc(kind) or ""
        kinds.setdefault(value, []).append(f"{code(kind.__name__)}: {about}")
    lines = [
        generated_from(SOURCES),
        "Every `shareproxy` command, and every batch job, ends with one of these codes. "
        "A failure's kind decides its code: the first kind in the table that the failure is "
        "one of.",
        "",
        "| code | name | meaning | failures of the kind |",
        "|---|---|---|---|",
    ]
    for name, value, meaning in codes():
        failures = "<br>".join(cell(k) for k in kinds.get(value, []))
        lines.append(f"| {value} | `{name}` | {cell(meaning)} | {failures} |")
    return "\n".join(lines) + "\n"
