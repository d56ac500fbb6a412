"""``serve --nodes N``: N proxy nodes on this machine, one process each, so every core serves
(one asyncio loop per process). Node i (from 0) gets node id ``--node-id`` + i (with
``--node-id auto``, each leases one), its Kafka listener ports + i times the number of listeners
and its admin port (and the port of its advertised admin URL) + i (port 0 stays ephemeral).
This process supervises them: a node that dies after it started is started again with a
back-off (and waits, as any process, for the dead one's lease to pass before it takes its id);
one that cannot start stops them all with its exit code; SIGTERM or SIGINT stops them all, and
so does the supervisor's own death."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shareproxy import config, exits
from shareproxy.embedded import signalled_when_parent_dies

# settings that differ per node; the rest is given to every node as it was given here
PER_NODE = ("node_id", "nodes", "listen", "listeners", "advertised_listener",
            "advertised_listeners", "admin_listen", "admin_advertised_url")  # fmt: skip
# a node that exits sooner than this after it started could not start: retrying will not help
STARTUP_S = 10.0
_PORT = re.compile(r":(\d+)(?=,|$)")


def shift_ports(addresses: str, by: int) -> str:
    """Every ``:PORT`` that ends an address in a HOST:PORT or PROTOCOL://HOST:PORT,… list, plus
    ``by``; port 0 (the system picks one) is left alone."""

    def shifted(m: re.Match[str]) -> str:
        port = int(m.group(1))
        return m.group(0) if port == 0 else f":{port + by}"

    return _PORT.sub(shifted, addresses)


def node_settings(settings: config.Settings, index: int) -> dict[str, Any]:
    """The per-node settings of node ``index`` (from 0). With several Kafka listeners each
    node takes as many ports: node 0 on 9092 and 9093, node 1 on 9094 and 9095, …"""
    out: dict[str, Any] = {"node_id": _node_id(settings, index), "nodes": 1}
    stride = len(settings.listeners.split(",")) if settings.listeners else 1
    for name in PER_NODE[2:]:
        value = getattr(settings, name)
        if value is not None:
            admin = name.startswith("admin_")
            out[name] = shift_ports(value, index * (1 if admin else stride))
    return out


def _node_id(settings: config.Settings, index: int) -> int | str:
    return settings.node_id + index if isinstance(settings.node_id, int) else settings.node_id


def node_command(
    flags: Mapping[str, Any], config_file: Path | None, overrides: Mapping[str, Any]
) -> list[str]:
    """``shareproxy serve`` for one node: the flags given here, then this node's own."""
    args = [sys.executable, "-m", "shareproxy.cli", "serve"]
    if config_file is not None:
        args += ["--config", str(config_file)]
    given = {k: v for k, v in flags.items() if v is not None and k not in PER_NODE}
    for name, value in {**given, **overrides}.items():
        flag = config.FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
        if isinstance(value, bool):
            on, _, off = flag.partition("/")
            args.append(on if value else (off or f"--no-{on[2:]}"))
        else:
            args += [flag.partition("/")[0], str(value)]
    return args


def supervise(settings: config.Settings, flags: Mapping[str, Any], config_file: Path | None) -> int:
    """Run ``settings.nodes`` nodes until a signal; the exit code."""
    if settings.auto_migrate:  # once, here: N nodes upgrading one schema at once would race
        _migrate(settings.state_url)
    nodes = [
        _Node(
            _node_id(settings, i) if isinstance(settings.node_id, int) else f"#{i + 1}",
            node_command(flags, config_file, node_settings(settings, i)),
        )
        for i in range(settings.nodes)
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

    def __init__(self, node_id: int | str, command: list[str]) -> None:
        self.node_id, self.command = node_id, command
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = self.due = 0.0
        self.backoff = 1.0
        self.first = True

    def start(self) -> None:
        # SIGTERM if the supervisor dies: the node stops cleanly, and never outlives it
        self.proc = subprocess.Popen(self.command, preexec_fn=_stop_with_parent)
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
