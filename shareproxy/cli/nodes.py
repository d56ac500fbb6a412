"""``serve --nodes N``: N proxy nodes on this machine, one process each, so every core serves
(one asyncio loop per process). Node i (from 0) gets node id ``--node-id`` + i and every port
of its listeners and admin API + i (port 0 stays ephemeral). This process supervises them: a
node that dies after it started is started again; one that cannot start stops them all with
its exit code; SIGTERM or SIGINT stops them all."""

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

# settings that differ per node; the rest is given to every node as it was given here
PER_NODE = ("node_id", "nodes", "listen", "listeners", "advertised_listener",
            "advertised_listeners", "admin_listen")  # fmt: skip
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
    """The per-node settings of node ``index`` (from 0)."""
    out: dict[str, Any] = {"node_id": settings.node_id + index, "nodes": 1}
    for name in PER_NODE[2:]:
        value = getattr(settings, name)
        if value is not None:
            out[name] = shift_ports(value, index)
    return out


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
    commands = [
        node_command(flags, config_file, node_settings(settings, i)) for i in range(settings.nodes)
    ]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    procs = [(subprocess.Popen(cmd), time.monotonic()) for cmd in commands]
    code = 0
    try:
        while not stopping:
            time.sleep(0.2)
            for i, (proc, started) in enumerate(procs):
                exit_code = proc.poll()
                if exit_code is None:
                    continue
                node = settings.node_id + i
                if time.monotonic() - started < STARTUP_S:
                    print(
                        f"error: node {node} could not start (exit {exit_code}): stopping all",
                        file=sys.stderr,
                    )
                    code = exit_code or exits.UNAVAILABLE
                    stopping = True
                    break
                print(f"node {node} exited ({exit_code}): starting it again", file=sys.stderr)
                procs[i] = (subprocess.Popen(commands[i]), time.monotonic())
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    return code


def _migrate(url: str) -> None:
    import asyncio

    from shareproxy.persistence import migrate
    from shareproxy.persistence.engine import shown_url, store_errors

    with store_errors(shown_url(url)):
        if not asyncio.run(migrate.schema_is_current(url)):
            migrate.upgrade(url)
