"""Proxy nodes sharing one store (issue 19): each holds a lease and sees the others live; a
process started with a live node's id replaces it, and the replaced one stops with a line
saying why, so two processes can never serve as one node."""

from __future__ import annotations

import re
import time

import httpx

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
