"""Print a pip constraints file pinning every dependency in pyproject.toml to its floor (its
``>=`` bound, or its ``==`` pin), for the CI job that proves the lower ends of the ranges.

Every dependency must have a floor: a range without one cannot be tested at its lower end.
Runs on the standard library alone (CI calls it before any venv exists).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")


def requirements(project: dict) -> list[str]:
    found = list(project["project"]["dependencies"])
    for group in project["project"].get("optional-dependencies", {}).values():
        found += group
    return [r for r in found if not r.startswith(project["project"]["name"] + "[")]


def floor(requirement: str) -> tuple[str, str]:
    """(name, lowest version allowed); ValueError when it has none."""
    match = REQUIREMENT.match(requirement)
    if match is None:
        raise ValueError(f"cannot read {requirement!r}")
    name, _, specifiers, _ = match.groups()
    for spec in (s.strip() for s in specifiers.split(",") if s.strip()):
        op, version = re.match(r"(==|>=|<=|~=|!=|<|>)\s*(\S+)", spec).groups()  # type: ignore[union-attr]
        if op in ("==", ">=", "~="):
            return name.lower(), version
    raise ValueError(f"{requirement!r} has no lower bound: its floor cannot be tested")


def main() -> int:
    project = tomllib.loads(PROJECT.read_text())
    try:
        pins = sorted(dict(floor(r) for r in requirements(project)).items())
    except ValueError as exc:
        print(f"error: pyproject.toml: {exc}", file=sys.stderr)
        return 1
    print("# the floors of pyproject.toml's ranges, made by .ci/floors.py")
    for name, version in pins:
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
