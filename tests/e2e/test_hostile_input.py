"""Hostile and malformed input: nothing a client sends crashes the proxy, starves other
clients, breaks the upstream connection others use, or takes more than its share of share
sessions. Each case is answered the way Kafka's broker answers it — an error code, or a closed
connection where Kafka closes it — and the proxy logs no error (the ``proxy`` fixture checks)."""

from __future__ import annotations

import base64
import dataclasses
import threading
import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import request_type
from tests.support.consumers import poll_until, readiness, share_consumer
from tests.support.kafka_client import KafkaConnection
from tests.support.proxy import ProxyProcess
from tests.support.topic_ids import topic_id
from tests.support.typical_requests import Names, build, typical

INVALID_GROUP_ID, INVALID_REQUEST, INVALID_CONFIG = 24, 42, 40
NETWORK_EXCEPTION, INVALID_RECORD, UNKNOWN_TOPIC_ID = 13, 87, 100
SHARE_SESSION_NOT_FOUND, SHARE_SESSION_LIMIT_REACHED = 122, 133
BOMB = bytes.fromhex("004d000100000001ffff00ffffffff0f")  # ShareGroupDescribe, 2^32-1 ids


def versions(c: KafkaConnection) -> int:
    """ApiVersions on ``c``: 0 while the connection serves."""
    return c.call(
        ApiVersionsRequest(client_software_name="t", client_software_version="1")
    ).error_code


def alive(port: int) -> bool:
    with KafkaConnection(port) as c:
        return versions(c) == 0


def request(key: int, version: int, names: Names, **changes: object) -> object:
    return dataclasses.replace(typical(key, version, names), **changes)


def test_a_frame_claiming_four_billion_entries_closes_only_its_connection(proxy):
    p = proxy()
    with KafkaConnection(p.port) as c:
        c.send_frame(BOMB)
        assert c.closed_by_peer()
    assert alive(p.port)
    assert "claims 4294967294 entries" in p.log()


def test_before_authentication_only_the_sasl_exchange_is_read(broker, postgres):
    url = postgres.create_database(f"h{uuid.uuid4().hex[:6]}", template="template_migrated")
    p = ProxyProcess(broker.bootstrap, url)
    p.options["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{p.port}"
    p.start()
    try:
        with KafkaConnection(p.port) as c:
            c.send_frame(BOMB)
            assert c.closed_by_peer()
        with KafkaConnection(p.port) as c:  # a frame too big for a SASL exchange
            c.sock.sendall((600 * 1024).to_bytes(4, "big"))
            assert c.closed_by_peer()
        assert alive(p.port)  # ApiVersions is answered before authentication
        log = p.log()
        assert "ShareGroupDescribe before SASL authentication" in log
        assert "claims 4294967294 entries" not in log  # never decoded
        assert "(limit 524288)" in log
    finally:
        p.stop()


FLOOD = 1_100  # made-up member ids, one ShareFetch each: past a client's 1,000 share sessions


def _made_up_member_id() -> str:
    """22 characters, as a client's generated member id (base64 of 16 random bytes)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]


def _flood(c: KafkaConnection, group: str, tid: uuid.UUID, topic: str, count: int) -> list[int]:
    """ShareFetch v1 at epoch 0 for ``count`` member ids that never sent a heartbeat, with no
    topics and nothing to forget: each opens a share session if there is room."""
    codes = []
    for _ in range(count):
        names = Names(topic, tid, group, member=_made_up_member_id())
        fetch = request(ApiKey.SHARE_FETCH, 1, names, topics=(), max_wait=timedelta(0))
        codes.append(c.call(fetch).error_code)
    return codes


def _consume_all(p: ProxyProcess, group: str, topic: str, count: int, within_s: float) -> None:
    consumer = share_consumer(p, group)
    consumer.subscribe([topic])
    try:
        got = poll_until(consumer, count, within_s)
        consumer.commit_sync()
    finally:
        consumer.close()
    assert sorted(m.offset() for m in got) == list(range(count))  # all, once, none stolen
    assert {m.delivery_count() for m in got} == {1}


def _sessions_become(p: ProxyProcess, count: int) -> None:
    deadline = time.monotonic() + 15
    while f"share_sessions {count}.0" not in _metrics(p) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert f"share_sessions {count}.0" in _metrics(p)


@pytest.mark.floors
def test_made_up_member_ids_on_one_connection_never_lock_out_another_groups_consumer(
    proxy, topic, produce
):
    """As Kafka's broker, ShareFetch checks a member id's form, not the group's membership, so
    member ids a client makes up each open a share session, until the client's 1,000. The
    flooding connection stays open, from the same principal and host as a real consumer of
    another group (a plaintext listener): that consumer is a member of its group, so a session
    no member owns gives way to it, and it gets every record."""
    t, empty = topic(1), topic(1)
    produce(t, 3_000, partitions=1)
    p = proxy()
    flooded, real = f"flood-{uuid.uuid4().hex[:8]}", f"real-{uuid.uuid4().hex[:8]}"
    tid = topic_id(p.port, empty)
    with KafkaConnection(p.port) as c:
        codes = _flood(c, flooded, tid, empty, FLOOD)
        assert codes == [0] * 1_000 + [SHARE_SESSION_LIMIT_REACHED] * (FLOOD - 1_000)
        too_long = Names(empty, tid, flooded, member="m" * 37)  # Kafka: at most a UUID's 36
        assert c.call(request(ApiKey.SHARE_FETCH, 1, too_long)).error_code == INVALID_REQUEST
        acked = c.call(request(ApiKey.SHARE_ACKNOWLEDGE, 1, Names(t, tid, flooded, "x")))
        assert acked.error_code == SHARE_SESSION_NOT_FOUND
        assert "share_sessions 1000.0" in _metrics(p)

        _consume_all(p, real, t, 3_000, within_s=10)
        assert "closed: the session cache is full" in p.log()
        _sessions_become(p, 999)  # the member left: one made-up session made room for it
        assert versions(c) == 0  # the flooding connection was open throughout


def test_made_up_member_ids_in_a_group_never_lock_out_its_real_member(proxy, topic, produce):
    t, empty = topic(1), topic(1)
    produce(t, 3_000, partitions=1)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:8]}"
    tid = topic_id(p.port, empty)
    with KafkaConnection(p.port) as c:
        codes = _flood(c, group, tid, empty, FLOOD)
        assert codes.count(0) == 1_000
        _consume_all(p, group, t, 3_000, within_s=10)
        assert versions(c) == 0


def test_two_clients_filling_the_whole_proxy_never_lock_out_a_member(proxy, topic, produce):
    """Two hosts, each within its own limit, fill the proxy's: a member from a third host
    still gets a session, a made-up one from a third host does not."""
    t, empty = topic(1), topic(1)
    produce(t, 500, partitions=1)
    p = proxy(max_share_sessions_per_client=60, group_share_max_share_sessions=100)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tid = topic_id(p.port, empty)
    with (
        KafkaConnection(p.port, source="127.0.0.2") as one,
        KafkaConnection(p.port, source="127.0.0.3") as two,
    ):
        assert _flood(one, group, tid, empty, 60).count(0) == 60
        assert _flood(two, group, tid, empty, 60).count(0) == 40
        assert _flood(two, group, tid, empty, 1) == [SHARE_SESSION_LIMIT_REACHED]
        _consume_all(p, f"real-{group}", t, 500, within_s=10)


def _metrics(p: ProxyProcess) -> str:
    import urllib.request

    with urllib.request.urlopen(f"{p.admin_url}/metrics", timeout=10) as r:
        return r.read().decode()


def test_a_forwarded_request_that_breaks_an_upstream_connection_fails_only_its_sender(proxy, topic):
    t = topic(1)
    p = proxy()
    names = Names(t, topic_id(p.port, t), "unused")
    statuses: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def watch_readiness() -> None:
        while not stop.is_set():
            statuses.append(readiness(p))
            time.sleep(0.05)

    def produce_through_the_proxy() -> None:
        producer = Producer({"bootstrap.servers": p.bootstrap, "linger.ms": 5})
        for i in range(2_000):
            producer.produce(
                t, f"r{i}".encode(), on_delivery=lambda e, _m: e and errors.append(str(e))
            )
            producer.poll(0)
            time.sleep(0.001)
        assert producer.flush(30) == 0

    threads = [threading.Thread(target=f) for f in (watch_readiness, produce_through_the_proxy)]
    for th in threads:
        th.start()
    try:
        for _ in range(20):
            # ListOffsets v7 with -3 (max timestamp): valid Kafka, but the test broker answers
            # it by dropping the connection; the proxy forwards it on this client's own one
            with KafkaConnection(p.port) as c:
                body = request(ApiKey.LIST_OFFSETS, 7, names)
                part = body.topics[0].partitions[0]
                body = dataclasses.replace(
                    body,
                    topics=(
                        dataclasses.replace(
                            body.topics[0], partitions=(dataclasses.replace(part, timestamp=-3),)
                        ),
                    ),
                )
                answer = c.call(body)
                assert answer.topics[0].partitions[0].error_code == NETWORK_EXCEPTION
                # a Produce with null records is refused before it goes upstream
                produce = request(ApiKey.PRODUCE, 9, names)
                data = produce.topic_data[0]
                null = dataclasses.replace(
                    data,
                    partition_data=(dataclasses.replace(data.partition_data[0], records=None),),
                )
                refused = c.call(dataclasses.replace(produce, topic_data=(null,)))
                assert refused.responses[0].partition_responses[0].error_code == INVALID_RECORD
                assert versions(c) == 0
            time.sleep(0.1)
    finally:
        threads[1].join(60)
        stop.set()
        threads[0].join(10)
    assert errors == []
    assert statuses and set(statuses) == {200}
    reader = Consumer({"bootstrap.servers": p.bootstrap, "group.id": "unused-plain"})
    reader.assign([TopicPartition(t, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 2_000 and time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    reader.close()
    assert got == [f"r{i}".encode() for i in range(2_000)]


NULL_ARRAYS = [
    (ApiKey.DELETE_GROUPS, 2, "groups_names"),
    (ApiKey.SHARE_GROUP_DESCRIBE, 1, "group_ids"),
    (ApiKey.SHARE_FETCH, 1, "topics"),
    (ApiKey.CREATE_ACLS, 3, "creations"),
    (ApiKey.DELETE_ACLS, 3, "filters"),
    (ApiKey.FIND_COORDINATOR, 6, "coordinator_keys"),
    (ApiKey.DESCRIBE_CONFIGS, 4, "resources"),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, "resources"),
]


@pytest.fixture(scope="module")
def shared_proxy(broker, postgres):
    """One proxy for the cases that each use their own connection and change nothing."""
    url = postgres.create_database(f"h{uuid.uuid4().hex[:6]}", template="template_migrated")
    p = ProxyProcess(broker.bootstrap, url).start()
    yield p
    p.stop()
    errors = [x for x in p.log().splitlines() if " ERROR " in x or x.startswith("Traceback")]
    assert not errors, "the proxy logged errors:\n" + "\n".join(errors)


@pytest.mark.parametrize(("key", "version", "field"), NULL_ARRAYS, ids=lambda v: str(v))
def test_a_null_array_the_schema_forbids_closes_the_connection_as_kafka_does(
    shared_proxy, key, version, field
):
    names = Names("t", uuid.uuid4(), "g")
    with KafkaConnection(shared_proxy.port) as c:
        c.sock.sendall(_encoded(request(key, version, names, **{field: None})))
        assert c.closed_by_peer()
    assert alive(shared_proxy.port)
    assert f"{field} is null" in shared_proxy.log()


def test_null_acknowledgement_batches_close_the_connection(shared_proxy):
    names = Names("t", uuid.uuid4(), "g")
    body = request(ApiKey.SHARE_FETCH, 2, names)
    m = __import__(type(body).__module__, fromlist=["x"])
    part = build(m.FetchPartition, partition_index=0, acknowledgement_batches=None)
    body = request(
        ApiKey.SHARE_FETCH,
        2,
        names,
        topics=(build(m.FetchTopic, topic_id=names.topic_id, partitions=(part,)),),
    )
    with KafkaConnection(shared_proxy.port) as c:
        c.sock.sendall(_encoded(body))
        assert c.closed_by_peer()
    assert "acknowledgement_batches is null" in shared_proxy.log()


def _encoded(body: object) -> bytes:
    from shareproxy.protocol.codec import encode_request

    return encode_request(9, "hostile", body)


@pytest.mark.parametrize("group", ["x" * 256, "nul\x00inside"], ids=["long", "nul"])
def test_group_ids_the_store_cannot_hold_get_invalid_group_id(shared_proxy, group):
    names = Names("t", uuid.uuid4(), group, member="m")
    with KafkaConnection(shared_proxy.port) as c:
        assert c.call(request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, names)).error_code == (
            INVALID_GROUP_ID
        )
        (described,) = c.call(request(ApiKey.SHARE_GROUP_DESCRIBE, 1, names)).groups
        assert described.error_code == INVALID_GROUP_ID
        (offsets,) = c.call(request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, names)).groups
        assert offsets.error_code == INVALID_GROUP_ID
        altered = c.call(request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, names))
        assert altered.error_code == INVALID_GROUP_ID
        deleted = c.call(request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, names))
        assert deleted.error_code == INVALID_GROUP_ID
        (result,) = c.call(request(ApiKey.DELETE_GROUPS, 2, names)).results
        assert result.error_code == INVALID_GROUP_ID
        assert c.call(request(ApiKey.SHARE_FETCH, 2, names)).error_code == INVALID_GROUP_ID
        acked = c.call(request(ApiKey.SHARE_ACKNOWLEDGE, 2, names))
        assert acked.error_code == INVALID_GROUP_ID
        (config,) = c.call(request(ApiKey.DESCRIBE_CONFIGS, 4, names)).results
        assert config.error_code == INVALID_GROUP_ID
        (alter,) = c.call(request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, names)).responses
        assert alter.error_code == INVALID_GROUP_ID
        assert versions(c) == 0


def test_a_subscription_to_an_impossible_topic_is_refused_and_nothing_is_poisoned(proxy, topic):
    import httpx

    t = topic(1)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:8]}"
    names = Names(t, uuid.uuid4(), group, member=uuid.uuid4().hex)
    with KafkaConnection(p.port) as c:
        bad = c.call(
            request(
                ApiKey.SHARE_GROUP_HEARTBEAT, 1, names, subscribed_topic_names=(t, "bad\x00topic")
            )
        )
        assert bad.error_code == INVALID_REQUEST and "bad" in bad.error_message
        assert c.call(request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, names)).error_code == 0
    described = httpx.get(f"{p.admin_url}/v1/share-groups/{group}", timeout=10).json()
    assert [m["subscriptions"] for m in described["members"]] == [[t]]


def test_out_of_range_values_get_error_responses_and_the_connection_stays(shared_proxy):
    names = Names("t", uuid.uuid4(), "g", member="m")
    with KafkaConnection(shared_proxy.port) as c:
        mode = c.call(request(ApiKey.SHARE_FETCH, 2, names, share_acquire_mode=7))
        assert mode.error_code == INVALID_REQUEST
        for version in (10, 11):  # topic ids need Metadata v12
            m = __import__(request_type(3, version).__module__, fromlist=["x"])
            body = request(
                ApiKey.METADATA,
                version,
                names,
                topics=(build(m.MetadataRequestTopic, name=None, topic_id=uuid.uuid4()),),
            )
            assert [x.error_code for x in c.call(body).topics] == [INVALID_REQUEST]
        m = __import__(request_type(32, 1).__module__, fromlist=["x"])
        long_key = build(
            m.DescribeConfigsResource,
            resource_type=32,
            resource_name="g",
            configuration_keys=("k" * 32_700,),  # the longest a v1 string holds
        )
        (result,) = c.call(
            request(ApiKey.DESCRIBE_CONFIGS, 1, names, resources=(long_key,))
        ).results
        assert result.error_code == INVALID_CONFIG and len(result.error_message) < 200
        assert versions(c) == 0


@pytest.mark.parametrize("version", [1, 2], ids=lambda v: f"v{v}")
def test_share_fetch_and_acknowledge_versions_answer_without_a_session(shared_proxy, version):
    """A member that never joined opens a session as on Kafka's broker; a topic id nobody
    has is that partition's error; an acknowledgement outside any session is refused."""
    names = Names("t", uuid.uuid4(), "g", member=uuid.uuid4().hex)
    with KafkaConnection(shared_proxy.port) as c:
        for wait in (timedelta(milliseconds=10), timedelta(0)):
            fetched = c.call(request(ApiKey.SHARE_FETCH, version, names, max_wait=wait))
            assert fetched.error_code == 0, fetched
            codes = [x.error_code for t in fetched.responses for x in t.partitions]
            assert codes == [UNKNOWN_TOPIC_ID], fetched
        alone = dataclasses.replace(names, member=uuid.uuid4().hex)
        acked = c.call(request(ApiKey.SHARE_ACKNOWLEDGE, version, alone))
        assert acked.error_code == SHARE_SESSION_NOT_FOUND


def test_an_upstream_answer_the_client_could_not_read_is_answered_readably(shared_proxy):
    """The test broker answers an OffsetFetch of all topics (null topics, allowed from v2)
    with bytes that do not follow the schema; relayed as they came, the client's reader fails
    and its connection is lost. The proxy reads every relayed coordinator answer anyway."""
    from kio.schema.offset_fetch.v4 import request as fetch_v4

    asked = fetch_v4.OffsetFetchRequest(group_id=f"all-{uuid.uuid4().hex[:6]}", topics=None)
    with KafkaConnection(shared_proxy.port) as c:
        answer = c.call(asked)  # readable
        assert answer.topics == ()
        assert versions(c) == 0  # and the connection still serves


def test_a_subscription_kafka_takes_is_kept_and_one_the_store_cannot_keep_is_refused(proxy, topic):
    """Kafka's coordinator takes any subscribed name (one no topic has matches nothing); the
    proxy stores subscriptions, so a name longer than the store keeps is refused, clearly."""
    import httpx

    t = topic(1)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:8]}"
    names = Names(t, uuid.uuid4(), group, member=uuid.uuid4().hex)
    odd = (t, f"^{t}$", "a b", "é" * 40)
    with KafkaConnection(p.port) as c:
        long = c.call(
            request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, names, subscribed_topic_names=(t, "x" * 256))
        )
        assert long.error_code == INVALID_REQUEST and "256 characters" in long.error_message
        kept = c.call(request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, names, subscribed_topic_names=odd))
        assert kept.error_code == 0
        assert [tp.partitions for tp in kept.assignment.topic_partitions] == [(0,)]
    described = httpx.get(f"{p.admin_url}/v1/share-groups/{group}", timeout=10).json()
    assert [m["subscriptions"] for m in described["members"]] == [sorted(odd)]
