"""Unmodified librdkafka share consumers (confluent-kafka's ShareConsumer) through shareproxy,
reading a Tansu broker that has no share groups, with the state in a real Postgres."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.support.cluster import LEASE_MS
from tests.support.consumers import accept_all, poll_until, readiness, share_consumer, wait_for


@pytest.mark.floors
def test_three_consumers_share_10k_records_each_accepted_once(proxy, topic, produce):
    t = topic(3)
    produce(t, 10_000)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    done = threading.Event()
    per_consumer: dict[int, int] = {}

    def run(i: int) -> None:
        c = share_consumer(p, group)
        c.subscribe([t])
        n = 0
        deadline = time.monotonic() + 90
        while not done.is_set() and time.monotonic() < deadline:
            for m in c.poll(0.5) or []:
                assert m.error() is None, m.error()
                n += 1
                with lock:
                    seen.append((m.partition(), m.offset()))
                    if len(seen) >= 10_000:
                        done.set()
        c.commit_sync()  # implicit mode: the last poll's records are accepted here
        c.close()
        per_consumer[i] = n

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(seen) == 10_000, f"{len(seen)} deliveries, {len(set(seen))} distinct"
    assert len(set(seen)) == 10_000  # nobody got a record twice
    assert sum(per_consumer.values()) == 10_000
    # every record is accepted: a newcomer in the group gets nothing
    late = share_consumer(p, group)
    late.subscribe([t])
    assert poll_until(late, 1, 4) == []
    late.close()


@pytest.mark.floors
def test_release_is_redelivered_and_reject_is_not(proxy, topic, produce):
    t = topic(1)
    produce(t, 10, partitions=1)
    p = proxy()
    c = share_consumer(p, f"g-{uuid.uuid4().hex[:6]}", mode="explicit")
    c.subscribe([t])
    first = poll_until(c, 10, 30)
    assert sorted(m.offset() for m in first) == list(range(10))
    assert {m.delivery_count() for m in first} == {1}
    for m in first:
        kind = (
            AcknowledgeType.ACCEPT
            if m.offset() < 5
            else AcknowledgeType.RELEASE
            if m.offset() < 8
            else AcknowledgeType.REJECT
        )
        c.acknowledge(m, kind)
    c.commit_sync()
    again = poll_until(c, 3, 30)
    assert sorted(m.offset() for m in again) == [5, 6, 7]
    assert {m.delivery_count() for m in again} == {2}
    for m in again:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync()
    assert poll_until(c, 1, 3) == []  # 8 and 9 were rejected: never delivered again
    c.close()


def test_close_releases_locks_at_once(proxy, topic, produce):
    t = topic(1)
    produce(t, 5, partitions=1)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = share_consumer(p, group, mode="explicit")
    a.subscribe([t])
    assert len(poll_until(a, 5, 30)) == 5
    a.close()  # nothing acknowledged: the locks (30 s) end now
    b = share_consumer(p, group, mode="explicit")
    b.subscribe([t])
    started = time.monotonic()
    redelivered = poll_until(b, 5, 20)
    assert sorted(m.offset() for m in redelivered) == [0, 1, 2, 3, 4]
    assert {m.delivery_count() for m in redelivered} == {2}
    assert time.monotonic() - started < 20
    b.close()


def test_lock_timeout_redelivers_to_another_consumer(proxy, topic, produce):
    t = topic(1)
    produce(t, 3, partitions=1)
    p = proxy(record_lock_duration_ms=1000)
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = share_consumer(p, group, mode="explicit")
    a.subscribe([t])
    held = {m.offset() for m in poll_until(a, 1, 30)}  # one poll: a never acknowledges them
    assert held
    b = share_consumer(p, group)  # implicit: each poll accepts what the one before returned
    b.subscribe([t])
    got = poll_until(b, 3, 30)
    b.commit_sync()
    assert sorted(m.offset() for m in got) == [0, 1, 2]
    assert {m.delivery_count() for m in got if m.offset() in held} == {2}
    b.close()
    a.close()


@pytest.mark.floors
def test_sigkill_and_restart_lose_nothing_and_redeliver_no_accepted_record(proxy, topic, produce):
    t = topic(3)
    produce(t, 3000)
    p = proxy(node_lease_ms=LEASE_MS)  # restarted after a SIGKILL: waits for its lease
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    accepted: set[tuple[int, int]] = set()
    while len(accepted) < 1500:
        batch = poll_until(c, 1, 30)
        assert batch, "no records before the crash"
        for m in batch:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            accepted.add((m.partition(), m.offset()))
    c.commit_sync()  # durable: answered only after the store committed it
    in_flight = poll_until(c, 1, 10)  # acquired, never acknowledged
    p.kill()
    p.start()  # same state, same port
    c.close()
    d = share_consumer(p, group)
    d.subscribe([t])
    rest: list[tuple[int, int]] = []
    deadline = time.monotonic() + 90
    while len(accepted) + len(set(rest)) < 3000 and time.monotonic() < deadline:
        rest.extend((m.partition(), m.offset()) for m in poll_until(d, 1, 1))
    d.commit_sync()
    d.close()
    assert not accepted & set(rest), "an accepted record was delivered again"
    assert accepted | set(rest) == {(i % 3, i // 3) for i in range(3000)}
    assert {(m.partition(), m.offset()) for m in in_flight} <= set(rest)


def test_a_garbage_frame_closes_only_its_connection(proxy, topic, produce):
    t = topic(1)
    produce(t, 20, partitions=1)
    p = proxy()
    c = share_consumer(p, f"g-{uuid.uuid4().hex[:6]}")
    c.subscribe([t])
    assert len(poll_until(c, 10, 30)) >= 10
    for garbage in (b"\x7f\xff\xff\xff" + b"x" * 64, b"\x00\x00\x00\x08" + b"\xff" * 8):
        with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
            s.sendall(garbage)
            assert s.recv(1024) == b""  # closed by the proxy
    produce(t, 20, partitions=1)
    got = poll_until(c, 20, 30)
    assert len(got) >= 20
    assert p.proc is not None and p.proc.poll() is None
    c.close()


def test_delivery_count_limit_archives_a_poison_record(proxy, topic, produce):
    t = topic(1)
    produce(t, 1, partitions=1)
    p = proxy(delivery_count_limit=2)
    c = share_consumer(p, f"g-{uuid.uuid4().hex[:6]}", mode="explicit")
    c.subscribe([t])
    counts = []
    for _ in range(2):
        [m] = poll_until(c, 1, 30)
        counts.append(m.delivery_count())
        c.acknowledge(m, AcknowledgeType.RELEASE)
        c.commit_sync()
    assert counts == [1, 2]
    assert poll_until(c, 1, 3) == []  # released at the limit: Archived, never again
    c.close()


@pytest.mark.long
def test_read_committed_skips_aborted_and_waits_for_open_transactions(proxy, topic, broker):
    from confluent_kafka import Producer

    t = topic(1)
    p = proxy(isolation_level="read_committed")
    tx = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{t}"})
    tx.init_transactions(15)
    for outcome, values in (("commit", [b"c1", b"c2"]), ("abort", [b"a1", b"a2", b"a3"])):
        tx.begin_transaction()
        for v in values:
            tx.produce(t, value=v, partition=0)
        tx.flush(10)
        tx.commit_transaction(15) if outcome == "commit" else tx.abort_transaction(15)
    tx.begin_transaction()
    tx.produce(t, value=b"late", partition=0)
    tx.flush(10)  # open: must not be delivered yet
    c = share_consumer(p, f"g-{uuid.uuid4().hex[:6]}")
    c.subscribe([t])
    first = [m.value() for m in poll_until(c, 3, 8)]
    assert first == [b"c1", b"c2"]
    tx.commit_transaction(15)
    assert [m.value() for m in poll_until(c, 1, 20)] == [b"late"]
    c.commit_sync()
    c.close()


@pytest.mark.floors
def test_producers_and_plain_consumers_pass_through(proxy, topic):
    from confluent_kafka import Consumer, Producer, TopicPartition

    t = topic(2)
    p = proxy()
    producer = Producer({"bootstrap.servers": p.bootstrap})
    for i in range(50):
        producer.produce(t, value=str(i).encode(), partition=i % 2)
    assert producer.flush(15) == 0
    reader = Consumer(
        {"bootstrap.servers": p.bootstrap, "group.id": "plain", "enable.auto.commit": False}
    )
    reader.assign([TopicPartition(t, 0, 0), TopicPartition(t, 1, 0)])
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < 50 and time.monotonic() < deadline:
        got += [m for m in reader.consume(50, 0.5) if m.error() is None]
    reader.close()
    assert sorted(int(m.value()) for m in got) == list(range(50))


def test_ten_consumers_on_one_partition_all_receive_records(proxy, topic, broker):
    from confluent_kafka import Producer

    t = topic(1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(2000):  # small upstream batches, so small acquisitions stay whole batches
        producer.produce(t, value=str(i).encode(), partition=0)
        if i % 10 == 9:
            producer.flush(10)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    received: dict[int, list[int]] = {i: [] for i in range(10)}
    lock = threading.Lock()
    done = threading.Event()

    def run(i: int) -> None:
        c = ShareConsumer(
            {"bootstrap.servers": p.bootstrap, "group.id": group, "max.poll.records": 20}
        )
        c.subscribe([t])
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            for m in c.poll(0.5) or []:
                assert m.error() is None, m.error()
                with lock:
                    received[i].append(m.offset())
                    if sum(len(v) for v in received.values()) >= 2000:
                        done.set()
                time.sleep(0.001)  # a consumer doing some work per record
        c.commit_sync()
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(10)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    everything = [o for offsets in received.values() for o in offsets]
    assert sorted(everything) == list(range(2000))
    assert all(received[i] for i in range(10)), {i: len(v) for i, v in received.items()}


@pytest.mark.floors
def test_the_proxy_survives_the_upstream_going_away(postgres):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from shareproxy.demo.tansu import TansuBroker
    from tests.support.proxy import ProxyProcess

    def make_topic(bootstrap: str, count: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("outage", 1, 1)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(count):
            producer.produce("outage", value=b"%d" % i, partition=0)
        assert producer.flush(10) == 0

    broker = TansuBroker().start()
    p = ProxyProcess(
        broker.bootstrap,
        postgres.create_database(f"outage{uuid.uuid4().hex[:6]}", template="template_migrated"),
        auto_offset_reset="earliest",
    )
    try:
        p.start()
        make_topic(broker.bootstrap, 10)
        c = share_consumer(p, "outage-group")
        c.subscribe(["outage"])
        assert len(poll_until(c, 10, 30)) == 10
        c.commit_sync()
        assert readiness(p) == 200
        broker.stop()
        # the cluster is gone: the proxy keeps answering and keeps running, not ready
        assert poll_until(c, 1, 3) == []
        assert readiness(p) == 503
        with socket.create_connection(("127.0.0.1", p.port), timeout=5):
            pass
        assert p.proc is not None and p.proc.poll() is None
        # it comes back (an empty broker: the topic is recreated, with a new topic id)
        broker = TansuBroker(port=broker.port).start()
        make_topic(broker.bootstrap, 5)
        again = poll_until(c, 5, 60)
        assert sorted(int(m.value()) for m in again) == [0, 1, 2, 3, 4]
        assert readiness(p) == 200
        c.commit_sync()
        c.close()
    finally:
        p.stop()
        broker.stop()
    # aiokafka logs refused connections as errors while the cluster is away; ours may not
    errors = [line for line in p.log().splitlines() if " ERROR shareproxy" in line]
    assert not errors, errors


def test_plain_log_lines_name_each_events_group_member_and_topic(proxy, topic, produce):
    t = topic(1)
    produce(t, 5, partitions=1)
    p = proxy()  # plain lines, the default
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    assert len(poll_until(c, 5, 30)) == 5
    c.close()
    text = p.log()
    joined = [line for line in text.splitlines() if "member joined" in line]
    assert joined and f"group={group}" in joined[0] and "member=" in joined[0], text
    loaded = [line for line in text.splitlines() if "share-partition loaded" in line]
    assert loaded and f"topic={t} partition=0 spso=0" in loaded[0], text
    assert "SharePartitionKey(" not in text and "UUID(" not in text, text
    assert f"admin API and metrics on http://127.0.0.1:{p.admin_port}" in text, text


def test_the_start_up_line_names_the_console_url(proxy):
    p = proxy()
    console = f"console at http://127.0.0.1:{p.admin_port}/ui/"
    text = wait_for(lambda: next((x for x in p.log().splitlines() if "serving" in x), ""))
    assert console in text, text
    page = httpx.get(p.admin_url, follow_redirects=True, timeout=30)  # the root: the console
    assert page.status_code == 200 and str(page.url) == f"{p.admin_url}/ui/", page.text


def test_a_pattern_in_a_subscription_matches_no_topic_and_is_no_error(proxy, topic, produce):
    """Kafka's coordinator takes a subscribed name that no topic can have, and it matches no
    topic: librdkafka, which sends ``^name$`` patterns as they are, reads the topic it also
    names, with no fatal error."""
    t = topic(1)
    produce(t, 20, partitions=1)
    p = proxy()
    c = share_consumer(p, f"g-{uuid.uuid4().hex[:6]}")
    c.subscribe([t, f"^{t}-none$"])
    try:
        assert len(accept_all(c, 20, timeout=30)) == 20
    finally:
        c.close()
