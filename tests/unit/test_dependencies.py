"""Dependency ranges: each has a floor (CI installs it, .ci/floors.py) and a cap or a pin;
the lock file (constraints.txt) pins every dependency inside its range."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def requirements() -> list[Requirement]:
    found = list(PROJECT["project"]["dependencies"])
    for group in PROJECT["project"]["optional-dependencies"].values():
        found += group
    return [Requirement(r) for r in found if Requirement(r).name != PROJECT["project"]["name"]]


def pins(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def test_every_range_has_a_floor_and_a_cap_or_a_pin():
    for req in requirements():
        ops = {s.operator for s in req.specifier}
        assert ops & {">=", "=="}, f"{req}: no floor to test"
        assert ops & {"<", "=="}, f"{req}: no cap: a new major could break it unseen"


def test_the_floors_constraints_pin_each_range_at_its_lower_end():
    made = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "floors.py")], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    floors = pins(made.stdout)
    for req in requirements():
        lowest = next(s.version for s in req.specifier if s.operator in (">=", "=="))
        assert floors[req.name.lower()] == lowest, req
        assert req.specifier.contains(floors[req.name.lower()]), req


def test_the_lock_pins_every_dependency_inside_its_range():
    locked = pins((ROOT / "constraints.txt").read_text())
    for req in requirements():
        name = req.name.lower().replace("_", "-")
        assert name in locked, f"{req.name} is not in constraints.txt: run .ci/lock"
        assert req.specifier.contains(locked[name]), (
            f"constraints.txt has {name}=={locked[name]}, outside {req}: run .ci/lock"
        )
