"""Several proxy nodes serving one share group (issue 19), judged by real librdkafka share
consumers: every node names the same brokers, leaders and coordinator; each partition is
served by its leader only; and a node killed mid-run costs seconds, never a record: what it had
handed out is delivered again by the node that takes its partitions over, and no acceptance it
confirmed is lost or redelivered."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient
from kio.schema.list_groups.v5.request import ListGroupsRequest

from shareproxy.embedded import TansuBroker
from tests.support.java import run_java
from tests.support.kafka_client import call
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess
from tests.support.relay import TcpRelay

LEASE_MS = 3000  # a node is taken to be dead this long after its last renewal
# each record costs its consumer this much work, so a run lasts seconds and a disruption lands
# while the partitions it hits still hold records (unpaced, 30,000 records drain in about 1 s)
WORK_S = 0.0005


@pytest.fixture
def cluster(
    broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[..., list[ProxyProcess]]]:
    started: list[ProxyProcess] = []

    def start(n: int, via: dict[int, int] | None = None, **options: object) -> list[ProxyProcess]:
        """n nodes on one store; ``via`` maps a node id to the port it reaches Postgres by."""
        url = postgres.create_database(f"cluster_{uuid.uuid4().hex[:8]}", "template_migrated")
        base = f"127.0.0.1:{postgres.port}/"
        nodes = [
            ProxyProcess(
                broker.bootstrap,
                url.replace(base, f"127.0.0.1:{(via or {}).get(i, postgres.port)}/"),
                node_id=i,
                **{
                    "node_lease_ms": LEASE_MS,
                    "auto_offset_reset": "earliest",
                    "group_share_min_record_lock_duration_ms": 1000,
                    "record_lock_duration_ms": 5000,
                    **options,
                },
            )
            for i in range(1, n + 1)
        ]
        started.extend(nodes)
        for node in nodes:
            node.start()
        return nodes

    try:
        yield start
    finally:
        for p in started:
            p.stop()
    for p in started:  # a store out of reach is logged as a warning, never a defect
        assert "Traceback" not in p.log(), p.log_path
        assert " ERROR " not in p.log(), p.log_path


def _view(node: ProxyProcess, topic: str) -> tuple[dict[int, str], dict[int, int]]:
    """The brokers and the partition leaders a client learns from one node."""
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=20)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    return brokers, {p.id: p.leader for p in md.topics[topic].partitions.values()}


def _owned(node: ProxyProcess) -> dict:
    return httpx.get(f"{node.admin_url}/readyz", timeout=10).json()["node"]


def _wait_for_view(nodes: list[ProxyProcess], topic: str) -> dict[int, int]:
    """The partition leaders, once every node has seen the same live set (within a renewal,
    a third of the lease: until then a client may be told either placement)."""
    ids = sorted(int(n.options["node_id"]) for n in nodes)
    deadline = time.monotonic() + 30
    while True:
        seen = [(o["live_nodes"], o["generation"]) for o in map(_owned, nodes)]
        if seen[0][0] == ids and all(v == seen[0] for v in seen):
            break
        assert time.monotonic() < deadline, f"the nodes never agreed: {seen}"
        time.sleep(0.2)
    views = [_view(n, topic) for n in nodes]
    assert all(v == views[0] for v in views), views
    return views[0][1]


def test_every_node_names_the_same_brokers_and_leaders_and_each_leads_a_share(
    cluster, topic, produce
):
    nodes, t, leaders = _started(cluster, topic, produce, 3, 600)
    brokers, _ = _view(nodes[0], t)
    assert brokers == {i + 1: n.bootstrap for i, n in enumerate(nodes)}
    assert set(leaders.values()) <= {1, 2, 3} and len(set(leaders.values())) >= 2
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = ShareConsumer({"bootstrap.servers": nodes[2].bootstrap, "group.id": group})
    c.subscribe([t])
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 600 and time.monotonic() < deadline:
        for m in c.poll(0.5) or []:
            assert m.error() is None, m.error()
            seen.add((m.partition(), m.offset()))
        c.commit_sync()
    c.close()
    assert seen == {(i % 6, i // 6) for i in range(600)}
    coordinators = set()
    for node in nodes:  # each node loaded exactly the share-partitions Metadata says it leads
        me = int(node.options["node_id"])
        owned = _owned(node)
        assert owned["node_id"] == me and owned["live_nodes"] == [1, 2, 3]
        led = {f"{group}/{t}/{p}" for p, leader in leaders.items() if leader == me}
        assert set(owned["share_partitions_led"]) == led
        if group in owned["groups_coordinated"]:
            coordinators.add(me)
    assert len(coordinators) == 1  # the group lives on one node only


@dataclass
class Tally:
    """What the consumers saw: confirmed acceptances, every delivery's count, and when."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    confirmed: dict[tuple[int, int], int] = field(default_factory=dict)  # record -> consumer
    counts: dict[tuple[int, int], int] = field(default_factory=dict)  # last delivery count
    redelivered_confirmed: list[tuple[int, int]] = field(default_factory=list)
    counts_down: list[tuple[tuple[int, int], int, int]] = field(default_factory=list)
    deliveries: list[tuple[float, int]] = field(default_factory=list)  # (time, partition)
    failed_commits: int = 0


def _consume(c: ShareConsumer, me: int, tally: Tally, total: int, stop: threading.Event) -> None:
    while not stop.is_set():
        with tally.lock:
            if len(tally.confirmed) >= total:
                return
        batch = [m for m in (c.poll(0.5) or []) if m.error() is None]
        now = time.monotonic()
        with tally.lock:
            for m in batch:
                key = (m.partition(), m.offset())
                if key in tally.confirmed:
                    tally.redelivered_confirmed.append(key)
                before = tally.counts.get(key)
                # a first delivery is not stored (as in Kafka): one the dead node made comes
                # again with count 1; a stored count (a release, a lock timeout) is kept
                if before is not None and m.delivery_count() < before:
                    tally.counts_down.append((key, before, m.delivery_count()))
                tally.counts[key] = m.delivery_count()
                tally.deliveries.append((now, m.partition()))
        if not batch:
            continue
        time.sleep(WORK_S * len(batch))
        for m in batch:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        try:
            results = c.commit_sync(30)
        except Exception:  # nothing confirmed: these may come again
            with tally.lock:
                tally.failed_commits += 1
            continue
        ok = {tp.partition for tp, err in results.items() if err is None}
        with tally.lock:
            for m in batch:
                if m.partition() in ok:
                    tally.confirmed.setdefault((m.partition(), m.offset()), me)
                else:
                    tally.failed_commits += 1


class Run:
    """Explicit-ack share consumers, one bootstrapped at each node, accepting everything in a
    topic while the test disrupts the cluster; the invariants are checked at the end."""

    def __init__(self, nodes: list[ProxyProcess], topic: str, total: int, partitions: int):
        self.topic, self.total, self.partitions = topic, total, partitions
        self.group = group = f"g-{uuid.uuid4().hex[:6]}"
        self.consumers = [
            ShareConsumer(
                {
                    "bootstrap.servers": n.bootstrap,
                    "group.id": group,
                    "share.acknowledgement.mode": "explicit",
                }
            )
            for n in nodes
        ]
        self.tally, self.stop = Tally(), threading.Event()

    def __enter__(self) -> Run:
        for c in self.consumers:
            c.subscribe([self.topic])
        self.threads = [
            threading.Thread(
                target=_consume, args=(c, i, self.tally, self.total, self.stop), daemon=True
            )
            for i, c in enumerate(self.consumers)
        ]
        for th in self.threads:
            th.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for th in self.threads:
            th.join(60)
        for c in self.consumers:
            c.close()

    def until_confirmed(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.tally.confirmed) < count:
            assert time.monotonic() < deadline, (
                f"only {len(self.tally.confirmed)} of {count}: " + self.missing()
            )
            time.sleep(0.1)

    def missing(self) -> str:
        """Which records were never confirmed, per partition (first offset and count)."""
        every = {(i % self.partitions, i // self.partitions) for i in range(self.total)}
        gone: dict[int, list[int]] = {}
        for p, o in sorted(every - set(self.tally.confirmed)):
            gone.setdefault(p, []).append(o)
        return ", ".join(f"p{p}: {len(os)} from {os[0]}" for p, os in gone.items())

    def until_confirmed_in(self, partitions: set[int], count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while sum(1 for p, _ in list(self.tally.confirmed) if p in partitions) < count:
            assert time.monotonic() < deadline, f"fewer than {count} in {partitions}"
            time.sleep(0.02)

    def until_all_accepted(self, nodes: list[ProxyProcess], timeout: float) -> None:
        """Until every record is accepted: confirmed to a consumer, or, where the answer was
        lost (a connection cut between the store's commit and the reply, so the consumer saw
        the acknowledgement fail), below its share-partition's start offset in the store."""
        deadline = time.monotonic() + timeout
        while len(self.tally.confirmed) < self.total and not self._stored_done(nodes):
            assert time.monotonic() < deadline, f"not all accepted: {self.missing()}"
            time.sleep(0.2)

    def _stored_done(self, nodes: list[ProxyProcess]) -> bool:
        starts: dict[int, int] = {}
        for node in nodes:
            if node.proc is None:
                continue  # killed
            url = f"{node.admin_url}/v1/share-groups/{self.group}/offsets"
            for row in httpx.get(url, timeout=10).json().get("partitions", []):
                if row["start_offset"] is not None:
                    p = row["partition"]
                    starts[p] = max(starts.get(p, 0), row["start_offset"])
        self.starts = starts
        per = self.total // self.partitions
        return all(starts.get(p, 0) >= per for p in range(self.partitions))

    def check(self) -> None:
        tally = self.tally
        assert tally.redelivered_confirmed == [], "a confirmed acceptance was delivered again"
        assert tally.counts_down == [], "a delivery count went down"
        unconfirmed = len(self.tally.confirmed) < self.total
        if unconfirmed:  # accepted in the store: the last start offsets read passed them all
            print(f"accepted but not confirmed to the consumer: {self.missing()}")


def _started(cluster, topic, produce, n: int, total: int, partitions: int = 6, **kw):
    """n nodes and a topic of which each node leads a partition or more (placement is by
    topic id: a topic that puts all on fewer nodes, a few percent of them, is passed over)."""
    nodes = cluster(n, **kw)
    for _ in range(20):
        t = topic(partitions)
        leaders = _wait_for_view(nodes, t)
        if len(set(leaders.values())) == n:
            produce(t, total, partitions=partitions)
            return nodes, t, leaders
    raise AssertionError("no topic spread over every node in 20 tries")


def _until_led(node: ProxyProcess, partitions: set[int], timeout: float) -> None:
    """Until the node leads (has loaded) these partitions' share-partitions."""
    deadline = time.monotonic() + timeout
    while True:
        led = _led_partitions(node)
        if led >= partitions:
            return
        assert time.monotonic() < deadline, f"{node.options['node_id']} leads only {led}"
        time.sleep(0.2)


def _led_by(leaders: dict[int, int], node: ProxyProcess) -> set[int]:
    led = {p for p, leader in leaders.items() if leader == int(node.options["node_id"])}
    assert led, f"node {node.options['node_id']} leads nothing: {leaders}"
    return led


def test_a_node_killed_mid_run_costs_seconds_and_never_a_confirmed_record(cluster, topic, produce):
    total = 50_000
    nodes, t, leaders = _started(cluster, topic, produce, 3, total)
    victim = nodes[1]
    orphaned = _led_by(leaders, victim)
    with Run(nodes, t, total, 6) as run:
        run.until_confirmed_in(orphaned, 1000, 120)  # mid-run on the partitions it leads
        victim.kill()
        killed_at = time.monotonic()
        run.until_all_accepted(nodes, 180)
    run.check()
    resumed = [at for at, p in run.tally.deliveries if p in orphaned and at > killed_at]
    assert resumed, "the killed node's partitions were never served again"
    failover_s = min(resumed) - killed_at
    print(f"failover {failover_s:.1f} s (lease {LEASE_MS} ms)")
    assert failover_s < LEASE_MS / 1000 + 15


def test_a_rolling_restart_under_load_loses_nothing_and_redelivers_nothing_confirmed(
    cluster, topic, produce
):
    total = 30_000
    nodes, t, _ = _started(cluster, topic, produce, 3, total)
    with Run(nodes, t, total, 6) as run:
        for i, node in enumerate(nodes):
            run.until_confirmed(total * (i + 1) // 5, 120)
            assert node.stop() == 0  # a clean stop: its lease is given up at once
            node.start()  # same node id and port
        run.until_all_accepted(nodes, 180)
    run.check()


def test_a_node_cut_off_from_the_store_stops_serving_and_another_takes_over(
    cluster, topic, produce, postgres
):
    total = 30_000
    relay = TcpRelay(postgres.port).start()
    try:
        nodes, t, leaders = _started(cluster, topic, produce, 2, total, via={1: relay.port})
        cut, other = nodes
        orphaned = _led_by(leaders, cut)
        with Run(nodes, t, total, 6) as run:
            run.until_confirmed_in(orphaned, 1000, 120)  # mid-run on the partitions it leads
            relay.cut()
            _until_led(other, orphaned, 30)  # the other node serves it all meanwhile
            assert _owned(other)["live_nodes"] == [int(other.options["node_id"])]
            run.until_confirmed(total * 2 // 5, 120)
            relay.start()  # back: it joins again, and the other lets its partitions go
            deadline = time.monotonic() + 30
            while _led_partitions(other) & orphaned or len(_owned(cut)["live_nodes"]) != 2:
                assert time.monotonic() < deadline, "the node back from the cut never rejoined"
                time.sleep(0.2)
            run.until_all_accepted(nodes, 180)
        run.check()
        assert "had lost its lease" in cut.log()
    finally:
        relay.cut()


def _accept_over_http(node: ProxyProcess, group: str, topic: str, tally: Tally) -> int:
    """Fetch from a node over HTTP and accept it all; what is confirmed joins the tally."""
    url = f"{node.admin_url}/v1/share-groups/{group}/records"
    got = httpx.post(
        f"{url}/fetch", json={"topics": [topic], "max_records": 2000}, timeout=30
    ).json()
    acks = [
        {
            "topic": topic,
            "partition": r["partition"],
            "first_offset": r["offset"],
            "last_offset": r["offset"],
            "type": "accept",
        }
        for r in got["records"]
    ]
    if not acks:
        return 0
    answer = httpx.post(
        f"{url}/acknowledge",
        json={"consumer_id": got["consumer_id"], "acknowledgements": acks},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    ok = {r["partition"] for r in answer.json()["results"] if r["error_code"] is None}
    with tally.lock:
        for r in got["records"]:
            if r["partition"] in ok:
                tally.confirmed.setdefault((r["partition"], r["offset"]), -1)
    return sum(1 for r in got["records"] if r["partition"] in ok)


def test_a_paused_leader_resumed_after_its_lease_passed_is_fenced(cluster, topic, produce):
    """Node 1 is paused (it still believes it leads its partitions); node 2 reaps its lease,
    claims those partitions and has records of them accepted over HTTP; node 1 resumes with
    fetches and acknowledgements in flight. What node 1 held is stale: it serves none of it,
    its writes are refused by the state epoch, and nothing node 2 confirmed comes again."""
    total = 30_000
    nodes, t, leaders = _started(cluster, topic, produce, 2, total)
    paused, other = nodes
    its = _led_by(leaders, paused)
    with Run(nodes, t, total, 6) as run:
        run.until_confirmed_in(its, 1000, 120)  # mid-run on the partitions it leads
        group = run.group
        assert paused.proc is not None
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 30
            while _owned(other)["live_nodes"] != [int(other.options["node_id"])]:
                assert time.monotonic() < deadline, "the paused node's lease never passed"
                time.sleep(0.2)
            taken = 0
            while not _led_partitions(other) >= its or taken == 0:
                assert time.monotonic() < deadline + 30, "the other node took nothing over"
                taken += _accept_over_http(other, group, t, run.tally)
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        run.until_all_accepted(nodes, 180)
    run.check()
    assert "had lost its lease" in paused.log()


def _led_partitions(node: ProxyProcess) -> set[int]:
    return {int(k.rsplit("/", 1)[1]) for k in _owned(node)["share_partitions_led"]}


def test_kafkas_java_client_sees_the_cluster_and_shares_a_topic_across_its_nodes(
    cluster, topic, produce, java
):
    nodes, t, leaders = _started(cluster, topic, produce, 3, 60)
    assert len(set(leaders.values())) >= 2
    admin = run_java(java, "admin", nodes[0].bootstrap, f"java-admin-{uuid.uuid4().hex[:8]}")
    assert admin["cluster.nodes"] == "3"
    out = run_java(java, "share", nodes[2].bootstrap, t, f"java-{uuid.uuid4().hex[:6]}", 60)
    assert out.pop("share.rejected") != "null"
    assert out == {
        "share.accepted": "59",
        "share.released.redelivered.count": "2",
        "share.problems": "[]",
    }


def test_group_admin_goes_to_the_groups_coordinator_and_each_group_is_listed_once(
    cluster, topic, produce
):
    nodes, t, _ = _started(cluster, topic, produce, 3, 60)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = ShareConsumer({"bootstrap.servers": nodes[0].bootstrap, "group.id": group})
    c.subscribe([t])
    try:
        deadline = time.monotonic() + 30
        while not any(group in _owned(n)["groups_coordinated"] for n in nodes):
            c.poll(0.5)
            assert time.monotonic() < deadline, "the group never joined"
        home = next(n for n in nodes if group in _owned(n)["groups_coordinated"])
        others = [n for n in nodes if n is not home]
        # admin clients ask every broker for its groups and join the answers: each node lists
        # the groups it coordinates, so the group is listed once, by its coordinator
        every = ListGroupsRequest(states_filter=(), types_filter=())
        listing = {n.options["node_id"]: [g.group_id for g in call(n.port, every).groups]
                   for n in nodes}  # fmt: skip
        assert [n for n, ids in listing.items() for g in ids if g == group] == [
            home.options["node_id"]
        ]
        # REST on the coordinator shows the member; elsewhere it names the coordinator
        url = f"/v1/share-groups/{group}"
        view = httpx.get(home.admin_url + url, timeout=10)
        assert view.status_code == 200 and len(view.json()["members"]) == 1
        for node in others:
            away = httpx.get(node.admin_url + url, timeout=10)
            assert away.status_code == 421, away.text
            assert f"proxy node {home.options['node_id']}" in away.json()["message"]
            gone = httpx.delete(node.admin_url + url, timeout=10)  # never behind its back
            assert gone.status_code == 421, gone.text
    finally:
        c.close()


def _coordinator(node: ProxyProcess, group: str) -> int:
    from kio.schema.find_coordinator.v4 import request as find

    located = call(node.port, find.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    return int(located.coordinators[0].node_id)


def _held_ms(
    node: ProxyProcess, group: str, topic_id: uuid.UUID, partitions: set[int], software: str
) -> float:
    """How long the node holds a ShareFetch with nothing to give, asked with MaxWaitMs 2000
    over a connection whose ApiVersions named ``software`` (name, version)."""
    from datetime import timedelta

    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.share_fetch.v1 import request as sf

    from tests.support.kafka_client import KafkaConnection

    name, version = software.split("/")
    with KafkaConnection(node.port) as k:
        k.call(ApiVersionsRequest(client_software_name=name, client_software_version=version))
        started = time.monotonic()
        answer = k.call(
            sf.ShareFetchRequest(
                group_id=group,  # not coordinated here: the leader trusts the session
                member_id=uuid.uuid4().hex,
                share_session_epoch=0,
                max_wait=timedelta(milliseconds=2000),
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=100,
                batch_size=100,
                topics=(
                    sf.FetchTopic(
                        topic_id=topic_id,
                        partitions=tuple(
                            sf.FetchPartition(partition_index=p, acknowledgement_batches=())
                            for p in sorted(partitions)
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
        )
        held = (time.monotonic() - started) * 1000
    assert answer.error_code == 0, answer
    assert all(p.acquired_records == () for t in answer.responses for p in t.partitions)
    return held


def test_a_client_that_fetches_one_node_at_a_time_is_not_held_where_there_is_nothing(
    cluster, topic, produce
):
    """librdkafka's share consumer asks one node at a time and waits for its answer: a node
    with nothing for it answers after --librdkafka-fetch-wait-ms while other nodes serve,
    so it asks them next. Kafka's Java client fetches from every
    leader at once and is held for the MaxWaitMs it asked for, as a Kafka broker holds it."""
    cap = 300  # --librdkafka-fetch-wait-ms, above its default so that the figure is clear
    nodes, t, leaders = _started(cluster, topic, produce, 2, 0, librdkafka_fetch_wait_ms=cap)
    from kio.schema.metadata.v12 import request as md

    node = nodes[0]
    meta = call(
        node.port,
        md.MetadataRequest(
            topics=(md.MetadataRequestTopic(topic_id=None, name=t),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    topic_id = meta.topics[0].topic_id
    its = _led_by(leaders, node)
    group = next(
        g
        for g in (f"g-idle-{i}" for i in range(20))
        if _coordinator(node, g) != int(node.options["node_id"])
    )
    # Java first: the group's first fetch here also loads its share-partitions
    java = _held_ms(node, group, topic_id, its, "apache-kafka-java/4.3.0")
    librdkafka = _held_ms(
        node, group, topic_id, its, "confluent-kafka-python/2.16.1-rdkafka-2.16.0"
    )
    assert cap - 5 <= librdkafka < 1000, librdkafka
    assert java >= 1900, java


def test_a_group_config_changed_through_one_node_applies_on_every_node(cluster, topic, produce):
    """share.auto.offset.reset set through node 1 only: node 2 starts the partitions it leads
    at the earliest offset too, so a consumer gets the records produced before the group."""
    from kio.schema.incremental_alter_configs.v1 import request as alter

    from shareproxy.kafka.handlers.group_configs_rpcs import GROUP

    nodes, t, leaders = _started(cluster, topic, produce, 2, 60, auto_offset_reset="latest")
    group = f"g-{uuid.uuid4().hex[:6]}"
    answer = call(
        nodes[0].port,
        alter.IncrementalAlterConfigsRequest(
            resources=(
                alter.AlterConfigsResource(
                    resource_type=GROUP,
                    resource_name=group,
                    configs=(
                        alter.AlterableConfig(
                            name="share.auto.offset.reset", config_operation=0, value="earliest"
                        ),
                    ),
                ),
            ),
            validate_only=False,
        ),
    )
    assert answer.responses[0].error_code == 0, answer
    c = ShareConsumer({"bootstrap.servers": nodes[1].bootstrap, "group.id": group})
    c.subscribe([t])
    got: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while sum(got.values()) < 60 and time.monotonic() < deadline:
            for m in c.poll(0.5) or []:
                if m.error() is None:
                    got[m.partition()] = got.get(m.partition(), 0) + 1
    finally:
        c.close()
    assert sum(got.values()) == 60, (got, leaders)
