"""A dependency out of reach while the proxy runs: the views that need the state store answer a
retriable error in one line (REST 503, CLI exit 3), the log says so once per outage rather than
once per retry, and everything works again once it is back; the offsets views answer what the
store has while the upstream cluster is away, with the lag unknown; while the cluster hangs,
Metadata for topics the proxy knows is answered from what it knows, as a broker's cache answers,
and Produce requests its clients gave up on end without a trace in the log."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kio.schema.describe_share_group_offsets.v1 import request as describe_offsets

from shareproxy.demo.tansu import TansuBroker
from shareproxy.kafka.context import KNOWN_TOPICS_WAIT_S
from shareproxy.runtime.consuming.partitions import LOAD_WAIT_S
from shareproxy.runtime.consuming.upstream_feed import READ_WAIT_PAST_MAX_WAIT_MS
from shareproxy.runtime.groups.partition_views import LOG_END_WAIT_S
from tests.support.kafka_client import call
from tests.support.proxy import ProxyProcess
from tests.support.relay import TcpRelay
from tests.support.rest_consumers import accept_some
from tests.support.topics import create_topic
from tests.support.topics import produce as produce_records

GROUP = "g-outage"
VIEWS = (
    "/v1/share-groups",
    f"/v1/share-groups/{GROUP}",
    f"/v1/share-groups/{GROUP}/offsets",
    f"/v1/share-groups/{GROUP}/config",
)


def _groups_cli(p: ProxyProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "groups", *args, "--admin-url", p.admin_url],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.floors
def test_a_store_outage_is_a_503_in_one_line_logged_once(broker, postgres, topic, produce):
    relay = TcpRelay(postgres.port).start()
    url = postgres.create_database(f"down{uuid.uuid4().hex[:6]}", template="template_migrated")
    url = url.replace(f":{postgres.port}/", f":{relay.port}/")
    p = ProxyProcess(broker.bootstrap, url, auto_offset_reset="earliest")
    t = topic(1)
    produce(t, 20, 1)
    try:
        p.start()
        with httpx.Client(base_url=p.admin_url, timeout=30) as http:
            accept_some(http, GROUP, t)
            lines_before = len(p.log().splitlines())
            relay.cut()
            started = time.monotonic()
            for path in VIEWS:
                r = http.get(path)
                assert r.status_code == 503, (path, r.status_code, r.text[:300])
                assert r.json()["error_code"] == "COORDINATOR_NOT_AVAILABLE", r.text
                assert "\n" not in r.json()["message"] and "state store" in r.json()["message"]
            for args in (("list",), ("offsets", GROUP), ("describe", GROUP)):
                done = _groups_cli(p, *args)
                assert done.returncode == 3, (args, done.returncode, done.stderr)
                assert len(done.stderr.strip().splitlines()) == 1, done.stderr
                assert "state store" in done.stderr, done.stderr
            # a consumer retrying meanwhile: every fetch would load a share-partition
            while time.monotonic() - started < 15:
                r = http.post(
                    f"/v1/share-groups/g-new-{uuid.uuid4().hex[:4]}/records/fetch",
                    json={"topics": [t], "max_wait_ms": 0},
                )
                assert r.status_code == 503, r.text
                time.sleep(0.5)
            # the node's lease has lapsed by now: still "retry", not "ask another node"
            for path in VIEWS:
                r = http.get(path)
                assert r.status_code == 503, (path, r.status_code, r.text[:300])
                assert r.json()["error_code"] == "COORDINATOR_NOT_AVAILABLE", r.text
            outage_lines = p.log().splitlines()[lines_before:]
            relay.start()
            deadline = time.monotonic() + 30
            while http.get("/v1/share-groups").status_code != 200:
                assert time.monotonic() < deadline, "the views did not come back"
                time.sleep(0.5)
            offsets = http.get(f"/v1/share-groups/{GROUP}/offsets")
            assert offsets.status_code == 200, offsets.text
            assert offsets.json()["partitions"][0]["start_offset"] > 0
            accept_some(http, GROUP, t)
    finally:
        p.stop()
        relay.cut()
    log = p.log()
    assert "Traceback" not in log, p.log_path
    warnings = [line for line in outage_lines if " WARNING " in line or " ERROR " in line]
    assert len(warnings) <= 3, "\n".join(warnings[:60])


@pytest.mark.floors
@pytest.mark.parametrize("cluster", ["stopped", "hanging"])
def test_offsets_without_the_upstream_are_the_stored_ones_with_the_lag_unknown(postgres, cluster):
    """Also while the cluster hangs (it accepts requests and never answers): the views wait
    ``LOG_END_WAIT_S`` for a log end, not a request timeout per partition; and a fetch gives up
    on its upstream read ``READ_WAIT_PAST_MAX_WAIT_MS`` past its wait, answering what the
    cache holds (then nothing), not the upstream's request timeout later; a fetch for a group
    the proxy has not loaded is answered retriable after ``LOAD_WAIT_S`` at most."""
    broker = TansuBroker().start()
    url = postgres.create_database(f"up{uuid.uuid4().hex[:6]}", template="template_migrated")
    p = ProxyProcess(broker.bootstrap, url, auto_offset_reset="earliest")
    try:
        t = create_topic(broker.bootstrap, 1)
        produce_records(broker.bootstrap, t, 20, 1, 100)
        p.start()
        with httpx.Client(base_url=p.admin_url, timeout=60) as http:
            accept_some(http, GROUP, t)
            before = http.get(f"/v1/share-groups/{GROUP}/offsets").json()["partitions"]
            assert [(x["start_offset"], x["lag"]) for x in before] == [(5, 15)]
            if cluster == "stopped":
                broker.stop()
            else:
                assert broker.proc is not None
                broker.proc.send_signal(signal.SIGSTOP)
            started = time.monotonic()
            for topics in (
                None,
                (
                    describe_offsets.DescribeShareGroupOffsetsRequestTopic(
                        topic_name=t, partitions=(0,)
                    ),
                ),
            ):
                request = describe_offsets.DescribeShareGroupOffsetsRequest(
                    groups=(
                        describe_offsets.DescribeShareGroupOffsetsRequestGroup(
                            group_id=GROUP, topics=topics
                        ),
                    )
                )
                [group] = call(p.port, request).groups
                assert group.error_code.value == 0, group
                [topic] = group.topics
                [part] = topic.partitions
                assert (part.error_code.value, part.start_offset, part.lag) == (0, 5, -1), part
            rest = http.get(f"/v1/share-groups/{GROUP}/offsets")
            assert rest.status_code == 200, rest.text
            [row] = rest.json()["partitions"]
            assert (row["start_offset"], row["lag"], row["high_watermark"]) == (5, None, None)
            assert rest.json()["total_lag"] is None
            assert time.monotonic() - started < 3 * (LOG_END_WAIT_S + 5)
            # the cache holds offsets 5-19; asked for more, the fetch reads upstream as well
            fetch = {"topics": [t], "max_wait_ms": 500, "max_records": 50}
            longest = (500 + READ_WAIT_PAST_MAX_WAIT_MS) / 1000 + 5
            for offsets in (list(range(5, 20)), []):
                started = time.monotonic()
                got = http.post(f"/v1/share-groups/{GROUP}/records/fetch", json=fetch)
                assert got.status_code == 200, got.text
                assert [r["offset"] for r in got.json()["records"]] == offsets, got.text
                assert time.monotonic() - started < longest
            # a group new to the proxy: its share-partition cannot load without the cluster
            started = time.monotonic()
            got = http.post("/v1/share-groups/g-new/records/fetch", json=fetch)
            assert got.status_code == 503, got.text
            assert got.json()["error_code"] == "UPSTREAM_UNAVAILABLE", got.text
            assert time.monotonic() - started < LOAD_WAIT_S + 5
    finally:
        if broker.proc is not None:
            broker.proc.send_signal(signal.SIGCONT)
        p.stop()
        broker.stop()
    problems = [x for x in p.log().splitlines() if " ERROR shareproxy" in x or "Traceback" in x]
    assert not problems, "\n".join(problems[:40])


def test_while_the_cluster_hangs_known_metadata_is_answered_and_produce_gives_up_cleanly(
    tmp_path: Path,
) -> None:
    """A cluster that accepts requests and never answers (the broker stopped, not dead) would
    hold a Metadata request for the upstream's whole request timeout, longer than a client
    waits; a topic the proxy knows is answered after ``KNOWN_TOPICS_WAIT_S`` instead. Produce
    requests meanwhile stay on their way upstream until the client gives up on them and
    drops its connection: their answers are cancelled then, and nothing is left unawaited or
    failing unread, neither then nor when the proxy stops with one still in flight."""
    broker = TansuBroker().start()
    p = ProxyProcess(broker.bootstrap, f"sqlite+aiosqlite:///{tmp_path}/state.db")
    try:
        t = create_topic(broker.bootstrap, 2)
        p.start()
        assert t in AdminClient({"bootstrap.servers": p.bootstrap}).list_topics(t, 30).topics
        producer = Producer({"bootstrap.servers": p.bootstrap, "message.timeout.ms": 3000})
        producer.produce(t, b"before")
        assert producer.flush(30) == 0
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            admin = AdminClient({"bootstrap.servers": p.bootstrap})
            started = time.monotonic()
            answer = admin.list_topics(t, timeout=20).topics[t]
            took = time.monotonic() - started
            for i in range(30):  # one request each, more than a connection may owe at once
                producer.produce(t, b"while stopped %d" % i)
                producer.poll(0.05)
            assert producer.flush(15) == 0  # each timed out in the client, which dropped them
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        assert answer.error is None, answer.error
        assert sorted(answer.partitions) == [0, 1]
        assert took < KNOWN_TOPICS_WAIT_S + 5, took
        producer.produce(t, b"after")
        assert producer.flush(30) == 0
        broker.proc.send_signal(signal.SIGSTOP)
        producer.produce(t, b"in flight at shutdown")
        producer.poll(1)
    finally:
        p.stop()
        if broker.proc is not None:
            broker.proc.send_signal(signal.SIGCONT)
        broker.stop()
    problems = [
        x
        for x in p.log().splitlines()
        if " ERROR " in x or "Traceback" in x or "never awaited" in x or "never retrieved" in x
    ]
    assert not problems, "\n".join(problems[:40])
