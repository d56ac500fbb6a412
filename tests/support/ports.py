"""Ports for parallel test workers: under pytest-xdist each worker takes only its own share of
the loopback ports, so two workers never hand out the same port.

``free_port`` closes the socket it probed with, and a proxy binds the port a second or so
later; meanwhile the kernel may offer that port to another process's probe. Within one
process ``shareproxy.host.processes`` never hands a port out twice; across workers this share
does the same. Imported first by ``tests/conftest.py``, so every later ``from
shareproxy.host.processes import free_port`` (the fixtures', the helpers', the tests', the Tansu
broker's) gets the worker's own."""

from __future__ import annotations

import os
import random
import socket

from shareproxy.host import processes

_ANY_PORT = processes.free_port
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, … under xdist
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_SHARE = int(_WORKER.removeprefix("gw")) if _WORKER.startswith("gw") else 0


def _share_of(port: int) -> int:
    # pairs of ports: Linux hands out mostly even ports to bind(0) (odd ones go to connect)
    return (port // 2) % _WORKERS


def free_port() -> int:
    """A loopback port nothing listens on, of this worker's share, never handed out before."""
    for _ in range(100_000):
        port = _ANY_PORT()
        if _share_of(port) == _SHARE:
            return port
    raise RuntimeError(f"no free loopback port of worker {_WORKER}'s share")


if _WORKERS > 1:
    processes.free_port = free_port


def _ephemeral_start() -> int:
    """Where the kernel's range of ports for outgoing connections begins."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_handed_out_fixed: set[int] = set()


def steady_ports(n: int) -> int:
    """The first of ``n`` consecutive loopback ports, free now, of this worker's share, and
    below the kernel's range for outgoing connections: a process killed and started again on
    them finds them free, where a port of that range may meanwhile be the local end of some
    outgoing connection (a pooled database connection lasts minutes) and refuse the bind."""
    top = _ephemeral_start() - n
    rng = random.Random()
    for _ in range(100_000):
        first = rng.randrange(10_000, top)
        ports = range(first, first + n)
        if any(p in _handed_out_fixed or _share_of(p) != _SHARE for p in ports):
            continue
        if all(_bindable(p) for p in ports):
            _handed_out_fixed.update(ports)
            return first
    raise RuntimeError(f"no {n} steady loopback ports of worker {_WORKER}'s share")
