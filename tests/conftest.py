"""Shared real parts: one throwaway Postgres cluster per session (a fresh database per test,
cloned from a migrated template) and a fresh migrated SQLite file per test."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import tests.support.ports  # noqa: F401  first: each parallel worker takes its own ports
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support import leaks
from tests.support.postgres import PostgresUnavailable, TemporaryPostgres
from tests.support.stores import migrated_url

_E2E = Path(__file__).parent / "e2e"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: each starts its own Postgres, broker, JVMs and proxies, and the
    end-to-end tests mostly wait on them, so two even on one core; more than four cost memory
    and load the machine past what the tests' deadlines allow."""
    return min(4, max(2, os.cpu_count() or 1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test under tests/e2e crosses a process boundary (a proxy, a broker, a client): marked
    ``e2e``, so that a stage can choose its tiers (the floors stage: ``not e2e or floors``).

    ``--dist loadscope`` runs each module on one worker, so its module fixtures (a proxy, a
    Spark session) start once, and hands out the modules with the most tests first. Within a
    module, and where modules tie, ``long`` scenarios go first, then the e2e tests."""
    for item in items:
        if _E2E in item.path.parents:
            item.add_marker(pytest.mark.e2e)

    def weight(item: pytest.Item) -> int:
        if item.get_closest_marker("long") is not None:
            return 0
        return 1 if item.get_closest_marker("e2e") is not None else 2

    items.sort(key=weight)


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """A test (with its function fixtures) stops every helper process it started; one left
    running is killed here and fails the test, so no orphan outlives the run."""
    before = set(leaks.running_helpers())
    yield
    left = {p: c for p, c in leaks.running_helpers().items() if p not in before}
    leaks.kill(left)
    assert not left, f"left running: {left}"


@pytest.fixture(autouse=True, scope="session")
def no_leftover_processes_at_the_end() -> Iterator[None]:
    """The same for the module and session fixtures, once they are all torn down."""
    yield
    left = leaks.running_helpers()
    leaks.kill(left)
    assert not left, f"left running after the session: {left}"


@pytest.fixture(scope="session")
def postgres() -> Iterator[TemporaryPostgres]:
    try:
        pg = TemporaryPostgres().start()
    except PostgresUnavailable as exc:
        pytest.fail(f"Postgres is required for the store tests and could not start: {exc}")
    try:
        pg.create_database("template_migrated")
        migrate.upgrade(pg.url("template_migrated"))
        yield pg
    finally:
        pg.stop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["postgres", "sqlite"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty state store of each kind."""
    return migrated_url(request, request.param, tmp_path)


@pytest.fixture
async def store(state_url: str) -> AsyncIterator[SqlShareStateStore]:
    engine = create_engine(state_url)
    try:
        yield SqlShareStateStore(engine, fold_every=5)
    finally:
        await engine.dispose()


@pytest.fixture
def run_blocking():
    """Run a blocking call (Alembic runs its own event loop) from an async test."""

    async def _run(fn, *args):
        return await asyncio.to_thread(fn, *args)

    return _run
