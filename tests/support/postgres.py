"""A throwaway PostgreSQL cluster from the server binaries (initdb / pg_ctl), for tests and
benchmarks. Postgres refuses to run as root, so as root the cluster runs as ``postgres``."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from shareproxy.embedded import free_port


class PostgresUnavailable(RuntimeError):
    pass


def find_bindir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for c in candidates:
        if (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).parent
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found. Install Debian's server: "
        "`apt-get install -y postgresql-15` (the test fixtures start a throwaway cluster from it)."
    )


class TemporaryPostgres:
    """``with TemporaryPostgres() as pg: pg.url("db")`` — started on loopback, removed after."""

    def __init__(self, fsync: bool = False) -> None:
        self.bindir = find_bindir()
        self.fsync = fsync
        self.port = free_port()
        self.base = Path(tempfile.mkdtemp(prefix="shareproxy-pg-"))
        self.data = self.base / "data"
        self._as_postgres = os.geteuid() == 0
        self._started = False

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.base)
        if proc.returncode != 0:
            log = self.base / "server.log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise PostgresUnavailable(
                f"{' '.join(args[:1])} failed ({proc.returncode}): {proc.stderr.strip()}\n{tail}"
            )
        return proc

    def start(self) -> TemporaryPostgres:
        if self._as_postgres:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable(
                    "running as root but there is no `postgres` user to run the server as"
                ) from exc
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        os.chmod(self.base, 0o755)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 "
            f"-c max_connections=200 -c fsync={'on' if self.fsync else 'off'} "
            f"-c synchronous_commit={'on' if self.fsync else 'off'} "
            "-c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.base / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        self._started = True
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        return self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atc",
            sql,
        ).stdout

    def create_database(self, name: str, template: str | None = None) -> str:
        suffix = f' TEMPLATE "{template}"' if template else ""
        self.psql(f'CREATE DATABASE "{name}"{suffix}')
        return self.url(name)

    def stop(self) -> None:
        if self._started:
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            finally:
                self._started = False
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
