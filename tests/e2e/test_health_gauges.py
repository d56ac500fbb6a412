"""The gauges the shipped alerts read (deploy/prometheus/alerts.yml) move with the real thing:
a share-partition's SPSO, its lag (also while no consumer fetches) and the age of its oldest
waiting record, the state store cut off (store down, then the node's lease lapsed, both back
once it answers), the upstream cluster stopped."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from shareproxy.demo.tansu import TansuBroker
from tests.support.consumers import wait_for
from tests.support.metrics import scrape, value
from tests.support.proxy import ProxyProcess
from tests.support.relay import TcpRelay
from tests.support.rest_consumers import accept_some
from tests.support.topics import create_topic
from tests.support.topics import produce as produce_records

GROUP = "g-health"


def _until(p: ProxyProcess, name: str, wanted: float, within: float) -> dict:
    def seen():
        s = scrape(p)
        return s if value(s, name) == wanted else None

    return wait_for(seen, within, f"{name} == {wanted}")


@pytest.mark.long
def test_spso_oldest_waiting_store_lease_and_upstream_gauges_move(postgres):
    broker = TansuBroker().start()
    relay = TcpRelay(postgres.port).start()
    url = postgres.create_database(f"hg{uuid.uuid4().hex[:6]}", template="template_migrated")
    url = url.replace(f":{postgres.port}/", f":{relay.port}/")
    p = ProxyProcess(broker.bootstrap, url, auto_offset_reset="earliest", node_lease_ms=3000)
    try:
        t = create_topic(broker.bootstrap, 1)
        produced_at = time.time()
        produce_records(broker.bootstrap, t, 20, 1, 100)
        p.start()
        with httpx.Client(base_url=p.admin_url, timeout=60) as http:
            accept_some(http, GROUP, t)
            s = scrape(p)
            where = {"group": GROUP, "topic": t, "partition": "0"}
            assert value(s, "share_partition_start_offset", **where) == 5
            assert value(s, "share_group_lag", **where) == 15
            oldest = value(s, "share_partition_oldest_waiting_timestamp_seconds", **where)
            assert produced_at - 5 <= oldest <= time.time(), (produced_at, oldest)
            for name in ("shareproxy_store_up", "shareproxy_upstream_up"):
                assert value(s, name) == 1, name
            assert value(s, "shareproxy_node_lease_held") == 1

            # nobody fetches now: records produced meanwhile still show as lag
            produce_records(broker.bootstrap, t, 10, 1, 100)
            wait_for(
                lambda: value(scrape(p), "share_group_lag", **where) == 25,
                30,
                "share_group_lag == 25 with no consumer fetching",
            )

            relay.cut()  # the lease renewals (every second) find the store gone
            _until(p, "shareproxy_store_up", 0, 10)
            _until(p, "shareproxy_node_lease_held", 0, 10)
            relay.start()
            s = _until(p, "shareproxy_node_lease_held", 1, 30)
            s = _until(p, "shareproxy_store_up", 1, 10)

            broker.stop()
            # the offsets view asks the cluster for the high watermarks: it is not there
            assert http.get(f"/v1/share-groups/{GROUP}/offsets").status_code == 200
            _until(p, "shareproxy_upstream_up", 0, 30)
    finally:
        p.stop()
        relay.cut()
        broker.stop()
    assert "Traceback" not in p.log(), p.log_path
