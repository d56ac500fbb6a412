"""The proxy's Kafka listener answered with real encoded requests (kio types), version by
version: what ApiVersions advertises is what is served."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from datetime import timedelta

import pytest
from kio.index import load_request_schema, load_response_schema

from shareproxy.kafka.dispatch import OWN, SERVED
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import decode_response, encode_request
from tests.support.kafka_client import KafkaConnection, call
from tests.support.typical_requests import build


@pytest.fixture(scope="module")
def running(broker, postgres):
    """One proxy for the module: these tests only read."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.proxy import ProxyProcess

    # names of their own: a parallel worker may set this fixture up more than once
    suffix = uuid.uuid4().hex[:8]
    name = f"protocol-topic-{suffix}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(name, 2, 1)]).values():
        f.result(30)
    url = postgres.create_database(f"protocol_{suffix}", template="template_migrated")
    p = ProxyProcess(broker.bootstrap, url)
    try:
        p.start()
        yield p, name
    finally:
        p.stop()
    assert " ERROR " not in p.log(), p.log()


def _versions(port: int, version: int = 3) -> dict[int, tuple[int, int]]:
    cls = load_request_schema(18, version)
    kwargs = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    response = call(port, cls(**kwargs))
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_lists_the_proxys_apis_and_what_it_relays_that_upstream_speaks(
    running, broker, version
):
    """The proxy's own APIs in all their versions; every forwarded or relayed API only in the
    versions the upstream broker speaks too (Tansu has no CreatePartitions: neither has the
    proxy), so a client never sends what the cluster cannot answer."""
    p, _ = running
    upstream = _versions(broker.port)
    expected = {}
    for key, (low, high) in SERVED.items():
        if key not in OWN:
            if key not in upstream:
                continue
            low, high = max(low, upstream[key][0]), min(high, upstream[key][1])
        expected[key] = (low, high)
    assert _versions(p.port, version) == expected
    assert ApiKey.CREATE_PARTITIONS not in expected and ApiKey.CREATE_TOPICS in expected
    assert ApiKey.JOIN_GROUP in expected and ApiKey.INIT_PRODUCER_ID in expected


@pytest.mark.parametrize("version", range(4, 14))
def test_metadata_names_the_proxy_as_leader_with_upstream_topic_ids(running, version):
    p, name = running
    cls = load_request_schema(3, version)
    m = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    fields = {"name": name}
    if version >= 10:
        fields["topic_id"] = None
    kwargs = {"topics": (m.MetadataRequestTopic(**fields),), "allow_auto_topic_creation": False}
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = False
    if 8 <= version <= 10:
        kwargs["include_cluster_authorized_operations"] = False
    response = call(p.port, cls(**kwargs))
    assert [(b.node_id, b.port) for b in response.brokers] == [(1, p.port)]
    [t] = response.topics
    assert t.name == name and t.error_code == 0
    assert sorted(x.partition_index for x in t.partitions) == [0, 1]
    assert {x.leader_id for x in t.partitions} == {1}
    if version >= 10:
        assert t.topic_id is not None


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_points_groups_and_transactions_at_the_proxy(running, version):
    """The proxy coordinates share groups itself and relays consumer groups and transactions
    to the upstream coordinators: clients are always told the proxy."""
    p, _ = running
    cls = load_request_schema(10, version)
    if version >= 4:
        response = call(p.port, cls(key_type=0, coordinator_keys=("g1", "g2")))
        assert [(c.key, c.node_id, c.port, c.error_code) for c in response.coordinators] == [
            ("g1", 1, p.port, 0),
            ("g2", 1, p.port, 0),
        ]
        txn = call(p.port, cls(key_type=1, coordinator_keys=("tx",)))
        assert [(c.node_id, c.port, c.error_code) for c in txn.coordinators] == [(1, p.port, 0)]
        other = call(p.port, cls(key_type=2, coordinator_keys=("x",)))
        assert other.coordinators[0].error_code == 15  # COORDINATOR_NOT_AVAILABLE
    else:
        kwargs = {"key": "g1"} | ({"key_type": 0} if version >= 1 else {})
        response = call(p.port, cls(**kwargs))
        assert (response.error_code, response.node_id, response.port) == (0, 1, p.port)


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster_names_the_proxy_under_the_upstream_clusters_id(running, broker, version):
    """Kafka's admin client asks DescribeCluster first: it gets the proxy's node, as Metadata
    says, and every cluster operation (authorization is off)."""
    p, _ = running
    cls = load_request_schema(60, version)
    response = call(
        p.port,
        build(
            cls,
            include_cluster_authorized_operations=True,
            endpoint_type=1,
            include_fenced_brokers=True,
        ),
    )
    upstream = call(
        broker.port,
        load_request_schema(3, 12)(
            topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
    )
    assert response.error_code == 0
    assert response.cluster_id == upstream.cluster_id
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, p.port)]
    assert response.controller_id == 1
    # CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE
    assert response.cluster_authorized_operations == sum(1 << op for op in (5, 9, 10, 11, 12, 7, 8))
    if version >= 1:  # a broker's listener is not a controller's, nor an unknown kind
        controllers = call(
            p.port,
            build(
                cls,
                include_cluster_authorized_operations=False,
                endpoint_type=2,
                include_fenced_brokers=False,
            ),
        )
        assert (controllers.error_code, controllers.brokers) == (114, ())
        unknown = call(
            p.port,
            build(
                cls,
                include_cluster_authorized_operations=False,
                endpoint_type=7,
                include_fenced_brokers=False,
            ),
        )
        assert unknown.error_code == 115


def test_describe_topic_partitions_pages_the_upstream_topics_with_the_proxy_as_leader(running):
    """KIP-966's cursor: a page holds at most ResponsePartitionLimit partitions and says where
    the next starts; unknown and invalid names get Kafka's errors, a bad cursor INVALID_REQUEST."""
    from kio.schema.describe_topic_partitions.v0 import request as q

    p, name = running

    def ask(names, limit=2000, cursor=None):
        return call(
            p.port,
            q.DescribeTopicPartitionsRequest(
                topics=tuple(q.TopicRequest(name=n) for n in names),
                response_partition_limit=limit,
                cursor=cursor,
            ),
        )

    whole = ask([name])
    [t] = whole.topics
    assert (t.error_code, t.name, whole.next_cursor) == (0, name, None)
    assert [(x.partition_index, x.leader_id, x.replica_nodes) for x in t.partitions] == [
        (0, 1, (1,)),
        (1, 1, (1,)),
    ]
    first = ask([name], limit=1)
    assert [x.partition_index for x in first.topics[0].partitions] == [0]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (name, 1)
    second = ask([name], limit=1, cursor=q.Cursor(topic_name=name, partition_index=1))
    assert [x.partition_index for x in second.topics[0].partitions] == [1]
    assert second.next_cursor is None
    missing = ask(["no-such-topic", "bad name!"])
    assert sorted((t.name, t.error_code) for t in missing.topics) == [
        ("bad name!", 17),  # INVALID_TOPIC_EXCEPTION
        ("no-such-topic", 3),  # UNKNOWN_TOPIC_OR_PARTITION
    ]
    bad_cursor = ask([name], cursor=q.Cursor(topic_name="elsewhere", partition_index=0))
    assert [t.error_code for t in bad_cursor.topics] == [42]
    past_all = ask([name], cursor=q.Cursor(topic_name="zzz", partition_index=0))
    assert [t.error_code for t in past_all.topics] == [42]  # the cursor names no asked topic
    assert name in {t.name for t in ask([]).topics}  # every topic when none is named


def test_an_unserved_version_closes_the_connection_and_api_versions_says_why(running):
    p, _ = running
    with KafkaConnection(p.port) as c:
        # Metadata v0 is not served: the connection is closed, as a Kafka broker does
        c.sock.sendall(encode_request(1, "t", load_request_schema(3, 0)(topics=())))
        assert c.closed_by_peer()
    # an ApiVersions version from the future gets UNSUPPORTED_VERSION with our versions (v0)
    with KafkaConnection(p.port) as c:
        c.send_frame(struct.pack(">hhih", 18, 99, 5, 1) + b"t")
        frame = c.read_frame()
    cid, response = decode_response(frame, load_response_schema(18, 0))
    assert (cid, response.error_code) == (5, 35)
    assert {k.api_key for k in response.api_keys} == set(_versions(p.port))


def _every_served_version() -> list[tuple[int, int]]:
    from tests.support.kio_strategies import served_versions

    return served_versions(SERVED)


@pytest.mark.parametrize(("key", "version"), _every_served_version(), ids=str)
def test_every_advertised_version_answers_a_typical_request(running, key, version):
    """Every version of every API the proxy handles, sent as a client would: where advertised,
    an answer that decodes, and (outside the SASL exchange, which ends a connection it fails) a
    connection that still serves; where not (the upstream cannot answer it), a closed
    connection, as a broker closes on an API version it does not have."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from tests.support.typical_requests import Names, typical

    p, name = running
    topic_id = call(p.port, _metadata_v12(name)).topics[0].topic_id
    low, high = _versions(p.port).get(key, (0, -1))
    if not low <= version <= high:  # not advertised (the upstream cannot answer it): refused
        with KafkaConnection(p.port) as c:
            c.send_frame(
                encode_request(1, "t", typical(key, version, Names(name, topic_id, "g")))[4:]
            )
            assert c.closed_by_peer()
        return
    with KafkaConnection(p.port) as c:
        answer = c.call(typical(key, version, Names(name, topic_id, f"typical-group-{key}")))
        assert answer is not None
        if key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            again = c.call(
                ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            assert again.error_code == 0


def _metadata_v12(name: str):
    cls = load_request_schema(3, 12)
    m = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    return cls(
        topics=(m.MetadataRequestTopic(topic_id=None, name=name),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.floors
def test_every_produce_version_writes_and_every_fetch_version_reads(running):
    """Produce v3-v11 each append a batch; Fetch v4-v12 each read them all back from the
    upstream leader (v4-v6 have no fetch session fields)."""
    from tests.support.typical_requests import Names, typical

    p, name = running
    names = Names(name, call(p.port, _metadata_v12(name)).topics[0].topic_id, "g")
    produced = []
    with KafkaConnection(p.port) as c:
        for version in range(SERVED[0][0], SERVED[0][1] + 1):
            (topic,) = c.call(typical(0, version, names)).responses
            (part,) = topic.partition_responses
            assert part.error_code == 0, (version, part)
            produced.append(part.base_offset)
        assert produced == sorted(produced)
        for version in range(SERVED[1][0], SERVED[1][1] + 1):
            answer = c.call(typical(1, version, names))
            (topic,) = answer.responses
            (part,) = topic.partitions
            assert part.error_code == 0, (version, part)
            assert part.high_watermark >= produced[-1] + 1
            assert part.records and len(part.records) > 61 * len(produced), version


@pytest.mark.floors
def test_pipelined_requests_are_answered_in_order_and_produces_keep_their_order(running):
    """A client may send several requests before reading: a Fetch that waits upstream, five
    Produces, then Metadata. Answers come back in request order; the Produces reach the
    broker in the order sent (their offsets rise); Metadata, served by the proxy, comes after
    everything before it, as a broker handles a connection's requests one after another."""
    from tests.support.typical_requests import Names, typical

    p, name = running
    names = Names(name, call(p.port, _metadata_v12(name)).topics[0].topic_id, "g")
    fetch = dataclasses.replace(  # waits upstream for bytes that never come, up to 300 ms
        typical(1, 12, names), max_wait=timedelta(milliseconds=300), min_bytes=1 << 30
    )
    bodies = [fetch, *(typical(0, 9, names) for _ in range(5)), _metadata_v12(name)]
    with KafkaConnection(p.port) as c:
        for cid, body in enumerate(bodies, start=100):
            c.sock.sendall(encode_request(cid, "pipeline", body))
        answers = [
            decode_response(c.read_frame(), load_response_schema(b.__api_key__, b.__version__))
            for b in bodies
        ]
    assert [cid for cid, _ in answers] == list(range(100, 100 + len(bodies)))
    offsets = [a.responses[0].partition_responses[0].base_offset for _, a in answers[1:6]]
    assert offsets == sorted(offsets) and len(set(offsets)) == 5
    assert answers[-1][1].topics[0].name == name
