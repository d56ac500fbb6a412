"""``shareproxy broker``: the embedded Tansu broker started by hand, for trying ``serve`` on a
local cluster. It says its bootstrap address, a Kafka client can use it, a stop signal stops it
cleanly (exit 0, port released), and a port already taken is one line and exit 4."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from shareproxy.host import exits
from shareproxy.host.processes import free_port, wait_for_port
from tests.support.topics import create_topic


def _broker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "shareproxy.cli", "broker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_the_broker_serves_a_kafka_client_and_stops_on_a_signal(stop: signal.Signals):
    port = free_port()
    proc = _broker("--listen", f"127.0.0.1:{port}")
    try:
        wait_for_port(port, 30, "shareproxy broker", lambda: proc.poll() is None)
        bootstrap = f"127.0.0.1:{port}"
        assert create_topic(bootstrap, 2).startswith("t-")
        proc.send_signal(stop)
        out, errors = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == exits.OK, errors
    assert f"bootstrap servers: {bootstrap}" in out.splitlines()
    assert f"--bootstrap-servers {bootstrap}" in out
    assert "Traceback" not in errors and f"stopped by {stop.name}" in errors
    with socket.socket() as s:  # Tansu went with it: the port is free again
        s.bind(("127.0.0.1", port))


def test_a_port_already_taken_is_one_line_and_exit_4():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _broker("--listen", f"127.0.0.1:{port}")
        out, errors = proc.communicate(timeout=60)
    assert proc.returncode == exits.CANNOT_LISTEN, (out, errors)
    assert errors.strip() == f"error: --listen 127.0.0.1:{port}: address already in use"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--listen", "nowhere"), "error: --listen nowhere: not HOST:PORT"),
        (("--storage", "file:///tmp/x"), "error: --storage file:///tmp/x: not a storage URL"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], said: str):
    proc = _broker(*args)
    out, errors = proc.communicate(timeout=60)
    assert proc.returncode == exits.USAGE, (out, errors)
    assert errors.startswith(said) and len(errors.strip().splitlines()) == 1, errors
