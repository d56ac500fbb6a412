"""Proxy nodes sharing one store (issue 19): each holds a lease and sees the others live; a
process started with a live node's id replaces it, and the replaced one stops with a line
saying why, so two processes can never serve as one node."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

import httpx
from confluent_kafka.admin import AdminClient

from shareproxy.embedded import free_port, spawn, stop_process, wait_for_port
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


def test_nodes_see_each_other_and_a_second_process_with_one_id_replaces_the_first(broker, postgres):
    url = postgres.create_database("cluster_nodes", template="template_migrated")
    lease = {"node_lease_ms": 3000}
    one = ProxyProcess(broker.bootstrap, url, node_id=1, **lease)
    two = ProxyProcess(broker.bootstrap, url, node_id=2, **lease)
    again = ProxyProcess(broker.bootstrap, url, node_id=1, **lease)
    try:
        one.start()
        two.start()
        _until(lambda: _live_nodes(one) == 2 == _live_nodes(two), 10, "nodes never saw each other")
        again.start()
        assert one.proc is not None
        code = one.proc.wait(timeout=15)  # within a renewal (a third of the lease) or so
        assert code == 1
        log = one.log()
        assert "node id 1 was registered by another process" in log
        assert "give every node its own --node-id" in log
        assert "held by a live process" in again.log()
        _until(lambda: _live_nodes(two) == 2, 10, "the replacement is not live")
        two.stop()
        _until(lambda: _live_nodes(again) == 1, 10, "a stopped node stayed live")
    finally:
        for p in (one, two, again):
            p.stop()


def _consecutive_free_ports(n: int) -> int:
    for _ in range(50):
        first = free_port()
        if all(_free(first + i) for i in range(1, n)):
            return first
    raise AssertionError(f"no {n} consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_serve_nodes_runs_one_process_per_node_on_consecutive_ports(broker, postgres, tmp_path):
    url = postgres.create_database("serve_nodes", template="template_migrated")
    kafka, admin = _consecutive_free_ports(2), _consecutive_free_ports(2)
    log = (tmp_path / "nodes.log").open("wb")
    proc = spawn(
        [sys.executable, "-m", "shareproxy.cli", "serve", "--nodes", "2", "--node-id", "7",
         "--bootstrap-servers", broker.bootstrap, "--state-url", url,
         "--listen", f"127.0.0.1:{kafka}", "--admin-listen", f"127.0.0.1:{admin}",
         "--node-lease-ms", "3000"],
        log,
    )  # fmt: skip
    try:
        for port in (kafka, kafka + 1, admin, admin + 1):
            wait_for_port(port, 60, "a node of serve --nodes 2", lambda: proc.poll() is None)
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka + 1}"}).list_topics(timeout=20)
        deadline = time.monotonic() + 15
        while len(md.brokers) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            md = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka}"}).list_topics(timeout=20)
        assert {b.id: b.port for b in md.brokers.values()} == {7: kafka, 8: kafka + 1}
        ready = httpx.get(f"http://127.0.0.1:{admin + 1}/readyz", timeout=10).json()
        assert ready["node"]["node_id"] == 8
    finally:
        code = stop_process(proc, grace_s=40)
        log.close()
    assert code == 0, (tmp_path / "nodes.log").read_text()
    assert all(_free(p) for p in (kafka, kafka + 1, admin, admin + 1))  # both nodes stopped


def test_serve_nodes_refuses_a_store_it_cannot_share(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "serve", "--nodes", "2",
         "--state-url", f"sqlite:///{tmp_path}/x.db"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--nodes" in done.stderr and "Postgres" in done.stderr
