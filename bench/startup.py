"""A node's start: the CPU ``shareproxy serve`` spends from exec until it is ready.

Every restart after a crash, every reschedule, every failover and every test that starts a
proxy waits on it. One Postgres and one Tansu broker; --runs cold starts of
``shareproxy serve`` (a new process each time; the database is migrated already, as after
the first start), each polled until its Kafka listener accepts a connection and ``/readyz``
answers 200. At that moment the node's CPU (user + system, from ``/proc``) and the wall time
since exec are read; the table gives each run and the median. ``--import-only`` times
``python -c 'import shareproxy.node.proxy'`` the same way, the part of a start that is imports.

    python -m bench.startup [--runs 5] [--import-only]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

from rich.console import Console
from rich.table import Table

from bench.cpu import cpu_seconds
from shareproxy.demo.tansu import TansuBroker
from shareproxy.host.processes import free_port
from shareproxy.persistence import migrate
from tests.support.postgres import TemporaryPostgres

POLL_S = 0.005


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _ready(admin_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/readyz", timeout=1) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def one_start(bootstrap: str, state_url: str, timeout_s: float = 120) -> tuple[float, float]:
    """(CPU seconds, wall seconds) from exec until the node is ready."""
    port, admin_port = free_port(), free_port()
    args = [
        *(sys.executable, "-m", "shareproxy.cli", "serve"),
        *("--bootstrap-servers", bootstrap, "--state-url", state_url),
        *("--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin_port}"),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = started + timeout_s
        while not (_accepts(port) and _ready(admin_port)):
            if proc.poll() is not None:
                raise SystemExit(f"shareproxy serve exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise SystemExit(f"shareproxy serve not ready after {timeout_s} s")
            time.sleep(POLL_S)
        wall = time.monotonic() - started
        user, system = cpu_seconds([proc.pid])
        return user + system, wall
    finally:
        proc.terminate()
        proc.wait(30)


def one_import() -> tuple[float, float]:
    started = time.monotonic()
    before = os.times()
    subprocess.run([sys.executable, "-c", "import shareproxy.node.proxy"], check=True)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return cpu, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--import-only", action="store_true")
    args = parser.parse_args()
    runs: list[tuple[float, float]] = []
    if args.import_only:
        runs = [one_import() for _ in range(args.runs)]
    else:
        with TemporaryPostgres() as pg:
            pg.create_database("startup_template")
            migrate.upgrade(pg.url("startup_template"))
            broker = TansuBroker().start()
            try:
                for i in range(args.runs):
                    url = pg.create_database(f"startup{i}", template="startup_template")
                    runs.append(one_start(broker.bootstrap, url))
            finally:
                broker.stop()
    what = "import shareproxy.node.proxy" if args.import_only else "shareproxy serve until ready"
    table = Table(title=f"{what}: {os.cpu_count()} cores, {args.runs} runs")
    table.add_column("run")
    table.add_column("CPU s", justify="right")
    table.add_column("wall s", justify="right")
    for i, (cpu, wall) in enumerate(runs, 1):
        table.add_row(str(i), f"{cpu:.2f}", f"{wall:.2f}")
    table.add_row(
        "median",
        f"{statistics.median(c for c, _ in runs):.2f}",
        f"{statistics.median(w for _, w in runs):.2f}",
    )
    Console().print(table)


if __name__ == "__main__":
    main()
