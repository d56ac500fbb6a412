"""Each node's ``shareproxy serve`` command line when one process starts several (``serve
--nodes N``, ``demo --nodes N``): node i (from 0) gets node id ``--node-id`` + i, its Kafka
listener ports + i times the number of listeners and its admin port (and the port of its
advertised admin URL) + i (port 0 stays ephemeral)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shareproxy.settings import model
from shareproxy.settings.model import ENV_PREFIX
from shareproxy.telemetry.secrets import hide_passwords

# settings that differ per node; the rest is given to every node as it was given here
PER_NODE = ("node_id", "nodes", "listen", "listeners", "advertised_listener",
            "advertised_listeners", "admin_listen", "admin_advertised_url")  # fmt: skip
_PORT = re.compile(r":(\d+)(?=,|$)")


def shift_ports(addresses: str, by: int) -> str:
    """Every ``:PORT`` that ends an address in a HOST:PORT or PROTOCOL://HOST:PORT,… list, plus
    ``by``; port 0 (the system picks one) is left alone."""

    def shifted(m: re.Match[str]) -> str:
        port = int(m.group(1))
        return m.group(0) if port == 0 else f":{port + by}"

    return _PORT.sub(shifted, addresses)


def node_settings(settings: model.Settings, index: int) -> dict[str, Any]:
    """The per-node settings of node ``index`` (from 0). With several Kafka listeners each
    node takes as many ports: node 0 on 9092 and 9093, node 1 on 9094 and 9095, …"""
    out: dict[str, Any] = {"node_id": node_id_of(settings, index), "nodes": 1}
    stride = len(settings.listeners.split(",")) if settings.listeners else 1
    for name in PER_NODE[2:]:
        value = getattr(settings, name)
        if value is not None:
            admin = name.startswith("admin_")
            out[name] = shift_ports(value, index * (1 if admin else stride))
    return out


def node_id_of(settings: model.Settings, index: int) -> int | str:
    return settings.node_id + index if isinstance(settings.node_id, int) else settings.node_id


@dataclass(frozen=True, slots=True)
class NodeCommand:
    """A node's command line, and the settings that hold a secret: those go in its environment
    (``SHAREPROXY_<NAME>``), which only its user can read, never on the command line, which
    ``ps`` shows everyone."""

    argv: list[str]
    secrets: dict[str, str]

    def environment(self) -> dict[str, str]:
        return {**os.environ, **self.secrets}


def node_command(
    flags: Mapping[str, Any], config_file: Path | None, overrides: Mapping[str, Any]
) -> NodeCommand:
    """``shareproxy serve`` for one node: the flags given here, then this node's own."""
    args = [sys.executable, "-m", "shareproxy.cli", "serve"]
    secrets: dict[str, str] = {}
    if config_file is not None:
        args += ["--config", str(config_file)]
    given = {k: v for k, v in flags.items() if v is not None and k not in PER_NODE}
    for name, value in {**given, **overrides}.items():
        flag = model.FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
        if isinstance(value, bool):
            on, _, off = flag.partition("/")
            args.append(on if value else (off or f"--no-{on[2:]}"))
        elif name in model.SECRET or hide_passwords(str(value)) != str(value):
            secrets[f"{ENV_PREFIX}{name.upper()}"] = str(value)
        else:
            args += [flag.partition("/")[0], str(value)]
    return NodeCommand(args, secrets)
