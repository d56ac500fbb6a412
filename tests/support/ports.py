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
