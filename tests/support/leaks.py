"""Which helper processes (proxies, brokers, S3 servers) this test run has left running: a test
or fixture that starts one must stop it, also when it fails."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

# what the fixtures start, as it shows in a command line (a Spark JVM may outlive a job: not ours)
HELPERS = ("shareproxy.cli", "tansu", "moto.server")


def running_helpers() -> dict[int, str]:
    """pid → command line of this process's live children that are helpers."""
    me = str(os.getpid())
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile
            continue
        state, ppid = stat.rpartition(")")[2].split()[:2]
        if ppid == me and state != "Z" and any(h in cmdline for h in HELPERS):
            found[int(entry.name)] = cmdline
    return found


def kill(pids: dict[int, str]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
