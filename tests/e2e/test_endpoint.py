"""One bootstrap for everything: stock librdkafka clients pointed only at the proxy — an admin
client, idempotent and transactional producers, a classic consumer group, a consumer that
assigns partitions and commits — work as they do against the cluster itself."""

from __future__ import annotations

import socket
import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kio.schema.create_topics.v7 import request as create_req
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest

from shareproxy.security.listeners import host_name
from tests.support.consumers import accept_all, share_consumer
from tests.support.kafka_client import call
from tests.support.proxy import ProxyProcess


@pytest.fixture
def endpoint(proxy):
    return proxy()


def _created(admin: AdminClient, name: str, partitions: int) -> None:
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def _produce(bootstrap: str, topic: str, values: list[bytes], **config: object) -> None:
    failed: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, **config})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 2, on_delivery=lambda e, m: e and failed.append(e))
    assert p.flush(30) == 0
    assert failed == []


def _read_all(consumer: Consumer, want: int, timeout: float = 60) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


def test_an_admin_client_creates_describes_and_deletes_topics_through_the_proxy(endpoint):
    admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    name = f"admin-{uuid.uuid4().hex[:8]}"
    _created(admin, name, 2)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        _created(admin, name, 2)
    (described,) = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, name)]
    ).values()
    assert isinstance(described.result(30), dict)  # answered by the upstream broker
    # what Kafka's controller refuses is refused before it reaches the cluster
    huge = create_req.CreateTopicsRequest(
        topics=(
            create_req.CreatableTopic(
                name=f"{name}-huge",
                num_partitions=2_000_000_000,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=timedelta(seconds=5),
        validate_only=False,
    )
    assert call(endpoint.port, huge).topics[0].error_code == 44  # POLICY_VIOLATION
    for f in admin.delete_topics([name]).values():
        f.result(30)
    deadline = time.monotonic() + 10
    while name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the deleted topic is still listed"
        time.sleep(0.2)


@pytest.mark.floors
def test_idempotent_and_transactional_producers_write_through_the_proxy(endpoint):
    """An idempotent producer (InitProducerId, then Produce with sequence numbers) and a
    transactional one (its coordinator found through the proxy); a read_committed consumer
    reads what was committed and never what was aborted."""
    admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    name = f"txn-{uuid.uuid4().hex[:8]}"
    _created(admin, name, 2)
    _produce(
        endpoint.bootstrap,
        name,
        [b"idem-%d" % i for i in range(20)],
        **{"enable.idempotence": True},
    )
    tx = Producer({"bootstrap.servers": endpoint.bootstrap, "transactional.id": f"tx-{name}"})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(5):
        tx.produce(name, b"committed-%d" % i, partition=0)
    tx.commit_transaction(30)
    tx.begin_transaction()
    for i in range(3):
        tx.produce(name, b"aborted-%d" % i, partition=1)
    tx.abort_transaction(30)
    reader = Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": f"reader-{name}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(name, p, 0) for p in (0, 1)])
    got = _read_all(reader, 25, timeout=30)
    reader.close()
    assert sorted(got) == sorted(
        [b"idem-%d" % i for i in range(20)] + [b"committed-%d" % i for i in range(5)]
    )


@pytest.mark.floors
def test_a_consumer_with_a_group_id_assigns_commits_and_resumes_from_its_commits(endpoint):
    """librdkafka with ``group.id`` and ``assign()``: OffsetCommit and OffsetFetch go to the
    upstream group coordinator through the proxy (this crashed the client when the proxy
    claimed the group and could not answer OffsetFetch)."""
    admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    name = f"assign-{uuid.uuid4().hex[:8]}"
    _created(admin, name, 2)
    _produce(endpoint.bootstrap, name, [b"v%d" % i for i in range(10)])
    config = {
        "bootstrap.servers": endpoint.bootstrap,
        "group.id": f"g-{name}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    parts = [TopicPartition(name, p) for p in (0, 1)]
    first = Consumer(config)
    first.assign(parts)
    assert len(_read_all(first, 6, timeout=30)) == 6
    first.commit(
        offsets=[TopicPartition(name, 0, 3), TopicPartition(name, 1, 2)], asynchronous=False
    )
    first.close()
    second = Consumer(config)
    committed = second.committed(parts, timeout=30)
    assert [(c.partition, c.offset) for c in committed] == [(0, 3), (1, 2)]
    second.assign(parts)  # resumes where the group committed
    rest = _read_all(second, 5, timeout=30)
    second.close()
    assert sorted(rest) == sorted([b"v6", b"v8", b"v5", b"v7", b"v9"])


@pytest.mark.long
def test_a_consumer_group_and_a_share_group_side_by_side(endpoint, broker):
    """A classic group (JoinGroup/SyncGroup/Heartbeat relayed to the upstream coordinator)
    consumes and commits; ListGroups shows it beside the proxy's share group; describing and
    deleting it reach the upstream cluster."""
    admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    name = f"grp-{uuid.uuid4().hex[:8]}"
    _created(admin, name, 2)
    _produce(endpoint.bootstrap, name, [b"v%d" % i for i in range(10)])
    group, share_group = f"classic-{name}", f"share-{name}"
    sc = share_consumer(endpoint, share_group)
    sc.subscribe([name])
    assert len(accept_all(sc, 10)) == 10
    c = Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([name])
    assert len(_read_all(c, 10, timeout=90)) == 10
    c.commit(asynchronous=False)
    listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert group in listed and share_group not in listed  # the client asks for consumer groups
    every = call(endpoint.port, ListGroupsRequest(states_filter=(), types_filter=())).groups
    types = {g.group_id: g.group_type for g in every}
    assert (types[group], types[share_group]) == ("classic", "share")
    # DescribeGroups relayed to the upstream coordinator answers as the coordinator itself
    # (librdkafka's describe_consumer_groups times out against Tansu, proxy or not)
    ask = DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)
    (seen,) = call(endpoint.port, ask).groups
    (truth,) = call(broker.port, ask).groups
    assert seen.group_state == truth.group_state == "Stable"
    assert [m.member_id for m in seen.members] == [m.member_id for m in truth.members] != []
    c.close()
    sc.close()
    for f in admin.delete_consumer_groups([group]).values():
        f.result(30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}


@pytest.mark.long
def test_a_coordinator_that_went_away_answers_a_retriable_error_per_group(postgres):
    """The proxy knows where a group's coordinator was; the broker goes away: each group of a
    relayed request is answered COORDINATOR_NOT_AVAILABLE (the client looks it up again), and
    the proxy logs no error (the fixture checks its log)."""
    from shareproxy.demo.tansu import TansuBroker
    from tests.support.proxy import ProxyProcess

    gone = TansuBroker().start()
    url = postgres.create_database(f"gone{uuid.uuid4().hex[:6]}", template="template_migrated")
    p = ProxyProcess(gone.bootstrap, url).start()
    try:
        ask = DescribeGroupsRequest(groups=("g-gone",), include_authorized_operations=False)
        (before,) = call(p.port, ask).groups  # the coordinator is looked up and cached
        assert before.error_code == 0
        gone.stop()
        (after,) = call(p.port, ask).groups
        assert (after.group_id, after.error_code) == ("g-gone", 15)  # COORDINATOR_NOT_AVAILABLE
    finally:
        p.stop()
        gone.stop()
    assert "Traceback" not in p.log(), p.log()


def test_a_listener_on_every_address_advertises_the_host_name(broker, tmp_path):
    """Clients on other machines are sent to this one, never to their own localhost."""
    p = ProxyProcess(broker.bootstrap, f"sqlite:///{tmp_path}/state.db")
    p.options["listen"] = f"0.0.0.0:{p.port}"  # after the helper's own --listen: it wins
    try:
        p.start()
        md = AdminClient({"bootstrap.servers": p.bootstrap}).list_topics(timeout=20)
    finally:
        p.stop()
    [advertised] = md.brokers.values()
    name = host_name()
    assert name not in ("localhost", "0.0.0.0") and name in (socket.getfqdn(), socket.gethostname())
    assert (advertised.host, advertised.port) == (name, p.port)
    assert f"advertising {name}:{p.port} for --listen 0.0.0.0:{p.port}" in p.log()
    assert "Traceback" not in p.log()
