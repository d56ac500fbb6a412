"""Proxy nodes sharing one store: each holds a lease and sees the others live; a
process started with a live node's id is refused (exit 2) unless told to replace it, and a
replaced one stops with a line saying why, so two processes can never serve as one node; ids
may be leased from the store; ``serve --nodes`` restarts a dead node quietly."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient

from shareproxy.cli.nodes import STARTUP_S
from shareproxy.host import exits
from shareproxy.host.cores import usable_cores
from shareproxy.host.processes import spawn, stop_process, wait_for_port
from tests.support.ports import steady_ports
from tests.support.proxy import ProxyProcess


def _live_nodes(p: ProxyProcess) -> float:
    text = httpx.get(f"{p.admin_url}/metrics", timeout=10).text
    m = re.search(r"^shareproxy_live_nodes (\S+)$", text, re.M)
    assert m is not None, "shareproxy_live_nodes is not exported"
    return float(m.group(1))


def _until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.long
def test_a_process_given_a_live_nodes_id_is_refused_unless_told_to_replace_it(broker, postgres):
    url = postgres.create_database("cluster_nodes", template="template_migrated")
    lease = {"node_lease_ms": 3000}
    one = ProxyProcess(broker.bootstrap, url, node_id=1, **lease)
    two = ProxyProcess(broker.bootstrap, url, node_id=2, **lease)
    again = ProxyProcess(broker.bootstrap, url, node_id=1, **lease)
    on_its_port = ProxyProcess(broker.bootstrap, url, node_id=1, **lease)
    on_its_port.port = one.port
    replacing = ProxyProcess(broker.bootstrap, url, node_id=1, **lease)
    replace = {"SHAREPROXY_REPLACE_NODE": "true"}
    nodes = (one, two, again, on_its_port, replacing)
    try:
        one.start()
        two.start()
        _until(lambda: _live_nodes(one) == 2 == _live_nodes(two), 10, "nodes never saw each other")
        assert again.start(wait=False).proc is not None
        assert again.proc.wait(timeout=30) == exits.USAGE  # within a renewal of node 1 or so
        errors = [x for x in again.log().splitlines() if x.startswith("error: ")]
        assert errors == [
            f"error: --node-id 1: held by a live node, advertising PLAINTEXT://127.0.0.1:{one.port}"
            "; give each node its own --node-id (or --node-id auto), or --replace-node to take "
            "it over"
        ], again.log()
        # told to replace it, but its port is taken: it fails before it registers
        assert on_its_port.start(wait=False, env=replace).proc is not None
        assert on_its_port.proc.wait(timeout=30) == exits.CANNOT_LISTEN
        time.sleep(2)  # a renewal of node 1 (a third of the lease) and more
        assert one.proc is not None and one.proc.poll() is None  # unharmed
        assert "registered by another process" not in one.log()
        assert _live_nodes(one) == 2
        replacing.start(env=replace)
        code = one.proc.wait(timeout=15)  # within a renewal (a third of the lease) or so
        assert code == 1
        assert "node id 1 was registered by another process (--replace-node" in one.log()
        assert "held by a live process" in replacing.log()
        _until(lambda: _live_nodes(two) == 2, 10, "the replacement is not live")
        two.stop()
        _until(lambda: _live_nodes(replacing) == 1, 10, "a stopped node stayed live")
    finally:
        for p in nodes:
            p.stop()
    for p in nodes:
        assert "Traceback" not in p.log(), p.log_path


@pytest.mark.long
def test_nodes_given_auto_ids_lease_the_lowest_free_ones(broker, postgres):
    url = postgres.create_database("auto_ids", template="template_migrated")
    fixed = ProxyProcess(broker.bootstrap, url, node_id=1, node_lease_ms=3000)
    auto = [ProxyProcess(broker.bootstrap, url, node_id="auto", node_lease_ms=3000) for _ in "ab"]
    try:
        fixed.start()
        for p in auto:
            p.start()
        ids = sorted(httpx.get(f"{p.admin_url}/readyz", timeout=10).json()["node"]["node_id"]
                     for p in auto)  # fmt: skip
        assert ids == [2, 3]
        _until(lambda: _live_nodes(fixed) == 3, 10, "the nodes never saw each other")
    finally:
        for p in (fixed, *auto):
            p.stop()


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.long
def test_serve_nodes_runs_one_process_per_node_on_consecutive_ports(broker, postgres, tmp_path):
    url = postgres.create_database("serve_nodes", template="template_migrated")
    kafka, admin = steady_ports(2), steady_ports(2)
    log = (tmp_path / "nodes.log").open("wb")
    proc = spawn(
        [sys.executable, "-m", "shareproxy.cli", "serve", "--nodes", "2", "--node-id", "7",
         "--bootstrap-servers", broker.bootstrap, "--state-url", url,
         "--listen", f"127.0.0.1:{kafka}", "--admin-listen", f"127.0.0.1:{admin}",
         "--node-lease-ms", "8000"],  # longer than a restart takes
        log,
    )  # fmt: skip
    try:
        for port in (kafka, kafka + 1, admin, admin + 1):
            wait_for_port(port, 60, "a node of serve --nodes 2", lambda: proc.poll() is None)
        up = time.monotonic()  # the nodes started before
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka + 1}"}).list_topics(timeout=20)
        deadline = time.monotonic() + 15
        while len(md.brokers) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            md = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka}"}).list_topics(timeout=20)
        assert {b.id: b.port for b in md.brokers.values()} == {7: kafka, 8: kafka + 1}
        ready = httpx.get(f"http://127.0.0.1:{admin + 1}/readyz", timeout=10).json()
        assert ready["node"]["node_id"] == 8
        # a node that dies is started again, and takes its id back once the dead one's lease
        # passed: neither a warning nor a node replaced
        time.sleep(max(0.0, up + STARTUP_S + 1 - time.monotonic()))  # up, not starting
        children = _children(proc.pid)
        [eight] = [pid for pid, args in children.items() if "--node-id\x008\x00" in args]
        os.kill(eight, signal.SIGKILL)
        _until(lambda: len(_children(proc.pid)) == 2 and eight not in _children(proc.pid), 10,
               "the dead node was not started again")  # fmt: skip
        for port in (kafka + 1, admin + 1):
            wait_for_port(port, 60, "node 8 started again", lambda: proc.poll() is None)
        ready = httpx.get(f"http://127.0.0.1:{admin + 1}/readyz", timeout=10).json()["node"]
        assert ready["node_id"] == 8 and ready["live_nodes"] == [7, 8]
        assert set(children) - {eight} <= set(_children(proc.pid))  # node 7 went on
    finally:
        code = stop_process(proc, grace_s=40)
        log.close()
    text = (tmp_path / "nodes.log").read_text()
    assert code == 0, text
    assert "node 8 exited (-9): starting it again" in text
    assert " WARNING " not in text and "Traceback" not in text, text
    assert all(_free(p) for p in (kafka, kafka + 1, admin, admin + 1))  # both nodes stopped


def test_serve_nodes_auto_runs_one_node_per_core_it_may_use(broker, postgres, tmp_path):
    """``--nodes auto`` in a process allowed two CPUs runs two nodes (one, where a cgroup CPU
    limit allows one core)."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    expected = min(len(cpus), usable_cores())
    url = postgres.create_database("serve_nodes_auto", template="template_migrated")
    kafka, admin = steady_ports(2), steady_ports(2)
    serve = [sys.executable, "-m", "shareproxy.cli", "serve", "--nodes", "auto",
             "--bootstrap-servers", broker.bootstrap, "--state-url", url,
             "--listen", f"127.0.0.1:{kafka}", "--admin-listen", f"127.0.0.1:{admin}"]  # fmt: skip
    pinned = f"import os, sys; os.sched_setaffinity(0, {cpus}); os.execv(sys.executable, {serve})"
    log = (tmp_path / "nodes.log").open("wb")
    proc = spawn([sys.executable, "-c", pinned], log)
    try:
        for i in range(expected):
            wait_for_port(
                admin + i, 60, f"node {i + 1} of --nodes auto", lambda: proc.poll() is None
            )
        nodes = {
            httpx.get(f"http://127.0.0.1:{admin + i}/readyz", timeout=10).json()["node"]["node_id"]
            for i in range(expected)
        }
        assert nodes == set(range(1, expected + 1))
        assert _free(admin + expected)  # no more than that
    finally:
        code = stop_process(proc, grace_s=40)
        log.close()
    text = (tmp_path / "nodes.log").read_text()
    assert code == 0, text
    many = "s" * (expected > 1)
    assert f"--nodes auto: {expected} node{many}, one per core this process may use" in text, text
    assert "Traceback" not in text, text


def _children(pid: int) -> dict[int, str]:
    """The processes a process started, with their command lines (NUL-separated)."""
    found = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError):  # gone meanwhile
            found[int(child)] = Path(f"/proc/{child}/cmdline").read_text()
    return found


@pytest.mark.parametrize("nodes", ["2", "auto"])
def test_serve_nodes_refuses_a_store_it_cannot_share(tmp_path, nodes):
    done = subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "serve", "--nodes", nodes,
         "--state-url", f"sqlite:///{tmp_path}/x.db"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--nodes" in done.stderr and "Postgres" in done.stderr
