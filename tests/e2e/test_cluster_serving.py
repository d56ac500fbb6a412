"""Several proxy nodes serving one share group, judged by real clients: every node
names the same brokers, leaders and coordinator; each partition is served by its leader only;
group admin goes to the group's coordinator; a client that asks one node at a time is not held
where there is nothing; and a group config changed through one node applies on all."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from confluent_kafka import ShareConsumer
from kio.schema.list_groups.v5.request import ListGroupsRequest

from tests.support.cluster import coordinator, led_by, owned, started, view
from tests.support.java import run_java
from tests.support.kafka_client import call
from tests.support.proxy import ProxyProcess


@pytest.mark.long
def test_every_node_names_the_same_brokers_and_leaders_and_each_leads_a_share(
    cluster, topic, produce
):
    nodes, t, leaders = started(cluster, topic, produce, 3, 600)
    brokers, _ = view(nodes[0], t)
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
        mine = owned(node)
        assert mine["node_id"] == me and mine["live_nodes"] == [1, 2, 3]
        led = {f"{group}/{t}/{p}" for p, leader in leaders.items() if leader == me}
        assert set(mine["share_partitions_led"]) == led
        if group in mine["groups_coordinated"]:
            coordinators.add(me)
    assert len(coordinators) == 1  # the group lives on one node only


@pytest.mark.long
def test_kafkas_java_client_sees_the_cluster_and_shares_a_topic_across_its_nodes(
    cluster, topic, produce, java
):
    nodes, t, leaders = started(cluster, topic, produce, 3, 60)
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


@pytest.mark.long
def test_group_admin_goes_to_the_groups_coordinator_and_each_group_is_listed_once(
    cluster, topic, produce
):
    nodes, t, _ = started(cluster, topic, produce, 3, 60)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = ShareConsumer({"bootstrap.servers": nodes[0].bootstrap, "group.id": group})
    c.subscribe([t])
    try:
        deadline = time.monotonic() + 30
        while not any(group in owned(n)["groups_coordinated"] for n in nodes):
            c.poll(0.5)
            assert time.monotonic() < deadline, "the group never joined"
        home = next(n for n in nodes if group in owned(n)["groups_coordinated"])
        others = [n for n in nodes if n is not home]
        # admin clients ask every broker for its groups and join the answers: each node lists
        # the groups it coordinates, so the group is listed once, by its coordinator
        every = ListGroupsRequest(states_filter=(), types_filter=())
        listing = {n.options["node_id"]: [g.group_id for g in call(n.port, every).groups]
                   for n in nodes}  # fmt: skip
        assert [n for n, ids in listing.items() for g in ids if g == group] == [
            home.options["node_id"]
        ]
        # REST on the coordinator shows the member; elsewhere the call is passed on to it
        url = f"/v1/share-groups/{group}"
        answer = httpx.get(home.admin_url + url, timeout=10)
        assert answer.status_code == 200 and len(answer.json()["members"]) == 1

        def members(view: httpx.Response) -> list[dict]:  # as of a heartbeat that may move on
            return [{**m, "last_heartbeat": None} for m in view.json()["members"]]

        for node in others:
            away = httpx.get(node.admin_url + url, timeout=10)
            assert away.status_code == 200 and members(away) == members(answer)
            gone = httpx.delete(node.admin_url + url, timeout=10)  # never behind its back
            assert gone.status_code == 409, gone.text
    finally:
        c.close()


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
        asked_at = time.monotonic()
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
        held = (time.monotonic() - asked_at) * 1000
    assert answer.error_code == 0, answer
    assert all(p.acquired_records == () for t in answer.responses for p in t.partitions)
    return held


@pytest.mark.long
def test_a_client_that_fetches_one_node_at_a_time_is_not_held_where_there_is_nothing(
    cluster, topic, produce
):
    """librdkafka's share consumer asks one node at a time and waits for its answer: a node
    with nothing for it answers after --librdkafka-fetch-wait-ms while other nodes serve,
    so it asks them next. Kafka's Java client fetches from every
    leader at once and is held for the MaxWaitMs it asked for, as a Kafka broker holds it."""
    cap = 300  # --librdkafka-fetch-wait-ms, above its default so that the figure is clear
    nodes, t, leaders = started(cluster, topic, produce, 2, 0, librdkafka_fetch_wait_ms=cap)
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
    its = led_by(leaders, node)
    group = next(
        g
        for g in (f"g-idle-{i}" for i in range(20))
        if coordinator(node, g) != int(node.options["node_id"])
    )
    # Java first: the group's first fetch here also loads its share-partitions
    java = _held_ms(node, group, topic_id, its, "apache-kafka-java/4.3.0")
    librdkafka = _held_ms(
        node, group, topic_id, its, "confluent-kafka-python/2.16.1-rdkafka-2.16.0"
    )
    assert cap - 5 <= librdkafka < 1000, librdkafka
    assert java >= 1900, java


@pytest.mark.long
def test_a_group_config_changed_through_one_node_applies_on_every_node(cluster, topic, produce):
    """share.auto.offset.reset set through node 1 only: node 2 starts the partitions it leads
    at the earliest offset too, so a consumer gets the records produced before the group."""
    from kio.schema.incremental_alter_configs.v1 import request as alter

    from shareproxy.kafka.handlers.group_configs_rpcs import GROUP

    nodes, t, leaders = started(cluster, topic, produce, 2, 60, auto_offset_reset="latest")
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
