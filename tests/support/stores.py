"""A migrated, empty state store for a test, of each kind the fixtures offer."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from tests.support.postgres import TemporaryPostgres

_counter = itertools.count()


def migrated_url(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> str:
    """A migrated, empty state store of this kind (postgres or sqlite)."""
    if kind == "postgres":
        pg: TemporaryPostgres = request.getfixturevalue("postgres")
        return pg.create_database(f"t{next(_counter)}", template="template_migrated")
    target = tmp_path / "state.db"
    shutil.copy(request.getfixturevalue("sqlite_template"), target)
    return f"sqlite:///{target}"
