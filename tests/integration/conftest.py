"""The runtime in-process: leaders, registry, upstream feed, consumption and group commit on a
migrated SQLite file and a real Tansu broker subprocess, without starting the proxy, so a
runtime bug fails in seconds with a traceback into the code that has it."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from shareproxy.demo.tansu import TansuBroker, TansuUnavailable
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.runtime import BrokerRuntime


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker]:
    try:
        b = TansuBroker().start()
    except (TansuUnavailable, RuntimeError) as exc:
        pytest.fail(f"the Tansu test broker could not start: {exc}")
    yield b
    b.stop()


@pytest.fixture
async def sqlite_store(sqlite_template: Path, tmp_path: Path) -> AsyncIterator[SqlShareStateStore]:
    """A migrated, empty SQLite state store (the embedded default)."""
    target = tmp_path / "state.db"
    shutil.copy(sqlite_template, target)
    engine = create_engine(f"sqlite:///{target}")
    try:
        yield SqlShareStateStore(engine, fold_every=5)
    finally:
        await engine.dispose()


@pytest.fixture
async def runtime(
    tansu: TansuBroker, sqlite_store: SqlShareStateStore
) -> AsyncIterator[BrokerRuntime]:
    rt = await BrokerRuntime(tansu, sqlite_store).start()
    try:
        yield rt
    finally:
        await rt.stop()
