"""``serve --nodes N``: N proxy nodes on this machine, one process each, so every core serves
(one asyncio loop per process). Node i (from 0) gets node id ``--node-id`` + i (with
``--node-id auto``, each leases one), its Kafka listener ports + i times the number of listeners
and its admin port (and the port of its advertised admin URL) + i (port 0 stays ephemeral).
This process supervises them: a node that dies after it started is started again with a
back-off (and waits, as any process, for the dead one's lease to pass before it takes its id);
one that cannot start stops them all with its exit code; SIGTERM or SIGINT stops them all, and
so does the supervisor's own death."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shareproxy.host import exits
from shareproxy.host.processes import signalled_when_parent_dies
from shareproxy.node.commands import NodeCommand, node_command, node_id_of, node_settings
from shareproxy.settings import model

# a node that exits sooner than this after it started could not start: retrying will not help
STARTUP_S = 10.0


def supervise(
    settings: model.Settings, count: int, flags: Mapping[str, Any], config_file: Path | None
) -> int:
    """Run ``count`` nodes (``settings.nodes``, or the cores ``auto`` found) until a signal; the
    exit code."""
    if settings.auto_migrate:  # once, here: N nodes upgrading one schema at once would race
        _migrate(settings.state_url)
    nodes = [
        _Node(
            node_id_of(settings, i) if isinstance(settings.node_id, int) else f"#{i + 1}",
            node_command(flags, config_file, node_settings(settings, i)),
        )
        for i in range(count)
    ]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    try:
        for node in nodes:
            node.start()
        while not stopping:
            time.sleep(0.2)
            for node in nodes:
                if stopping:
                    break
                failed = node.check(time.monotonic())
                if failed is not None:  # it never started: another try would fail the same way
                    print(f"error: node {node.node_id} could not start (exit {failed}): "
                          "stopping all", file=sys.stderr)  # fmt: skip
                    code, stopping = failed or exits.UNAVAILABLE, True
    finally:
        for node in nodes:
            node.terminate()
        for node in nodes:
            node.wait()
    return code


class _Node:
    """One node process: started again with a growing back-off (1 s doubling to 30 s) when it
    dies after it started; a failure on its first start is reported instead."""

    def __init__(self, node_id: int | str, command: NodeCommand) -> None:
        self.node_id, self.command = node_id, command
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = self.due = 0.0
        self.backoff = 1.0
        self.first = True

    def start(self) -> None:
        # SIGTERM if the supervisor dies: the node stops cleanly, and never outlives it
        self.proc = subprocess.Popen(
            self.command.argv, env=self.command.environment(), preexec_fn=_stop_with_parent
        )
        self.started = time.monotonic()

    def check(self, now: float) -> int | None:
        """Start it again if it is due; the exit code of a first start that failed."""
        if self.proc is None:
            if now >= self.due:
                self.start()
            return None
        exit_code = self.proc.poll()
        if exit_code is None:
            if now - self.started > STARTUP_S:
                self.first, self.backoff = False, 1.0  # up and running
            return None
        if self.first and now - self.started < STARTUP_S:
            return exit_code
        print(f"node {self.node_id} exited ({exit_code}): starting it again in "
              f"{self.backoff:.0f} s", file=sys.stderr)  # fmt: skip
        self.proc, self.due = None, now + self.backoff
        self.backoff = min(self.backoff * 2, 30.0)
        return None

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


_stop_with_parent = signalled_when_parent_dies(signal.SIGTERM)


def _migrate(url: str) -> None:
    import asyncio

    from shareproxy.persistence import migrate
    from shareproxy.persistence.engine import shown_url, store_errors

    with store_errors(shown_url(url)):
        if not asyncio.run(migrate.schema_is_current(url)):
            migrate.upgrade(url)
