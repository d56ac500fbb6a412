"""A config file may name a secret instead of holding it: ``"${NAME}"`` in a value is the
environment variable NAME's value, read with the file. ``--print-config`` writes each secret
so, and the file it prints can be kept, shared or committed, and served as it is wherever the
same variables are set."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def reference(variable: str) -> str:
    """How a file names ``variable``'s value."""
    return "${" + variable + "}"


def expand(data: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """The file's settings with each reference replaced by its variable's value, and the first
    reference no variable answers (``(key, NAME)``, described) or ``""``."""
    missing = ""
    expanded: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str) and "${" in value:

            def value_of(m: re.Match[str], key: str = key) -> str:
                nonlocal missing
                if m[1] not in environ:
                    missing = missing or f"{key} names {m[0]}, which is not set"
                return environ.get(m[1], "")

            value = _REFERENCE.sub(value_of, value)
        expanded[key] = value
    return expanded, missing
