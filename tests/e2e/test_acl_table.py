"""KIP-932's ACL table enforced on every RPC it names, each RPC kio-encoded over a SASL
connection to the secured proxy: refused with Kafka's error before the grant, answered after
it; and the ACL RPCs themselves (CreateAcls, DescribeAcls, DeleteAcls)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from tests.support.kafka_client import KafkaConnection
from tests.support.secure import PASSWORDS


@pytest.mark.long
def test_every_row_of_the_acl_table_has_a_denied_and_an_allowed_case(secure, topic, produce):
    """Each RPC of KIP-932's table, kio-encoded over a SASL PLAIN connection: refused with the
    Kafka error before the grant, answered after it."""
    from datetime import timedelta

    from kio.schema.alter_share_group_offsets.v0 import request as alter
    from kio.schema.delete_groups.v2 import request as delete_groups
    from kio.schema.delete_share_group_offsets.v0 import request as delete_offsets
    from kio.schema.describe_share_group_offsets.v1 import request as describe_offsets
    from kio.schema.fetch.v12 import request as fetch
    from kio.schema.metadata.v12 import request as md
    from kio.schema.share_acknowledge.v1 import request as ack
    from kio.schema.share_fetch.v1 import request as sf
    from kio.schema.share_group_describe.v1 import request as describe
    from kio.schema.share_group_heartbeat.v1 import request as hb

    t = topic(1)
    produce(t, 3, partitions=1)
    user = f"row{uuid.uuid4().hex[:6]}"
    with secure.http() as admin:
        assert admin.post("/v1/users", json={"name": user, "password": "row-pw"}).status_code == 201
    principal = f"User:{user}"
    group, idle = f"g-{user}", f"idle-{user}"
    deadline = time.monotonic() + 10
    while True:  # the proxy reloads users every couple of seconds
        k = KafkaConnection(secure.sasl)
        if k.plain(user, "row-pw").error_code == 0:
            break
        k.close()
        assert time.monotonic() < deadline, "the new user never became usable"
        time.sleep(0.5)
    GA, TA = 30, 29  # GROUP_ / TOPIC_AUTHORIZATION_FAILED

    def call(body):
        return k.call(body)

    def grant(rtype: str, name: str, *ops: str) -> None:
        secure.acl(principal, rtype, name, *ops)  # applied at once by the proxy that took it

    def metadata(names=None):
        topics = (
            None
            if names is None
            else tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names)
        )
        return call(md.MetadataRequest(topics=topics, include_topic_authorized_operations=False))

    try:
        # Metadata -> Describe Topic: hidden from the listing, refused by name
        assert t not in {x.name for x in metadata().topics}
        assert metadata([t]).topics[0].error_code.value == TA
        grant("TOPIC", t, "DESCRIBE")
        listed = {x.name: x for x in metadata().topics}
        assert t in listed and listed[t].error_code.value == 0
        topic_id = listed[t].topic_id

        # Fetch pass-through -> Read Topic
        def plain_fetch():
            r = call(
                fetch.FetchRequest(
                    max_wait=timedelta(milliseconds=10),
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=(
                        fetch.FetchTopic(
                            topic=t,
                            partitions=(
                                fetch.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                    rack_id="",
                )
            )
            return r.responses[0].partitions[0].error_code.value

        assert plain_fetch() == TA
        grant("TOPIC", t, "READ")
        assert plain_fetch() == 0

        # ShareGroupHeartbeat -> Read Group
        join = hb.ShareGroupHeartbeatRequest(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, subscribed_topic_names=(t,)
        )
        assert call(join).error_code.value == GA
        # ShareGroupDescribe -> Describe Group
        desc = describe.ShareGroupDescribeRequest(
            include_authorized_operations=False, group_ids=(group,)
        )
        assert call(desc).groups[0].error_code.value == GA

        # ShareFetch / ShareAcknowledge -> Read Group (and Read Topic, granted above)
        def share_fetch(member: str, epoch: int, acks=(), of=topic_id, wait_ms=500):
            return call(
                sf.ShareFetchRequest(
                    group_id=group,
                    member_id=member,
                    share_session_epoch=epoch,
                    max_wait=timedelta(milliseconds=wait_ms),
                    min_bytes=1,
                    max_bytes=1 << 20,
                    max_records=10,
                    batch_size=10,
                    topics=(
                        sf.FetchTopic(
                            topic_id=of,
                            partitions=(
                                sf.FetchPartition(partition_index=0, acknowledgement_batches=acks),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                )
            )

        member = join.member_id
        assert share_fetch(member, 0).error_code.value == GA
        acknowledge = ack.ShareAcknowledgeRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=1,
            topics=(
                ack.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=(
                        ack.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=(
                                ack.AcknowledgementBatch(
                                    first_offset=0, last_offset=0, acknowledge_types=(1,)
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        )
        assert call(acknowledge).error_code.value == GA
        grant("GROUP", group, "READ")  # Read also allows Describe (Kafka's implied operations)
        assert call(join).error_code.value == 0
        assert call(desc).groups[0].error_code.value == 0
        got = share_fetch(member, 0)
        part = got.responses[0].partitions[0]
        assert got.error_code.value == 0 and part.error_code.value == 0
        assert [(r.first_offset, r.last_offset) for r in part.acquired_records] == [(0, 2)]
        acked = call(acknowledge)
        assert acked.error_code.value == 0
        assert acked.responses[0].partitions[0].error_code.value == 0

        # the group allowed, a topic not: per-partition TOPIC_AUTHORIZATION_FAILED
        t2 = topic(1)
        grant("TOPIC", t2, "DESCRIBE")
        t2_id = {x.name: x.topic_id for x in metadata([t2]).topics}[t2]
        refused = share_fetch(member, 2, of=t2_id, wait_ms=10)
        codes = {
            (x.topic_id, p.partition_index): p.error_code.value
            for x in refused.responses
            for p in x.partitions
        }
        assert codes[(t2_id, 0)] == TA

        # the offsets RPCs on a group without members
        def describe_idle():
            r = call(
                describe_offsets.DescribeShareGroupOffsetsRequest(
                    groups=(
                        describe_offsets.DescribeShareGroupOffsetsRequestGroup(
                            group_id=idle, topics=None
                        ),
                    )
                )
            )
            return r.groups[0]

        def alter_idle():
            r = call(
                alter.AlterShareGroupOffsetsRequest(
                    group_id=idle,
                    topics=tuple(
                        alter.AlterShareGroupOffsetsRequestTopic(
                            topic_name=name,
                            partitions=(
                                alter.AlterShareGroupOffsetsRequestPartition(
                                    partition_index=0, start_offset=1
                                ),
                            ),
                        )
                        for name in (t, t2)
                    ),
                )
            )
            return r.error_code.value, {
                x.topic_name: x.partitions[0].error_code.value for x in r.responses
            }

        def delete_idle():
            r = call(
                delete_offsets.DeleteShareGroupOffsetsRequest(
                    group_id=idle,
                    topics=tuple(
                        delete_offsets.DeleteShareGroupOffsetsRequestTopic(topic_name=name)
                        for name in (t, t2)
                    ),
                )
            )
            return r.error_code.value, {x.topic_name: x.error_code.value for x in r.responses}

        def delete_group():
            r = call(delete_groups.DeleteGroupsRequest(groups_names=(idle,)))
            return r.results[0].error_code.value

        assert describe_idle().error_code.value == GA
        assert alter_idle()[0] == GA
        assert delete_idle()[0] == GA
        assert delete_group() == GA
        grant("GROUP", idle, "READ")
        assert alter_idle() == (69, {})  # GROUP_ID_NOT_FOUND: altering creates no group (Kafka)
        member = uuid.uuid4().hex  # so the group exists, empty: one member joins and leaves
        for epoch, topics in ((0, (t,)), (-1, None)):
            beat = hb.ShareGroupHeartbeatRequest(
                group_id=idle, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
            )
            assert call(beat).error_code.value == 0
        assert alter_idle() == (0, {t: 0, t2: TA})  # Read on t, not on t2
        described = describe_idle()
        assert described.error_code.value == 0
        assert {x.topic_name: x.partitions[0].error_code.value for x in described.topics} == {t: 0}
        assert delete_idle() == (0, {t: 0, t2: TA})
        assert delete_group() == GA  # Read does not allow Delete
        grant("GROUP", idle, "DELETE")
        assert delete_group() == 0
    finally:
        k.close()

    # Produce pass-through -> Write Topic, with a real producer
    def produce_one() -> str:
        outcome: list[str] = []
        p = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{secure.sasl}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user,
                "sasl.password": "row-pw",
                "message.timeout.ms": 10000,
            }
        )
        p.produce(t, b"v", on_delivery=lambda err, _m: outcome.append(err.name() if err else "ok"))
        p.flush(15)
        return outcome[0] if outcome else "no report"

    assert produce_one() == "TOPIC_AUTHORIZATION_FAILED"
    grant("TOPIC", t, "WRITE")
    assert produce_one() == "ok"


def test_create_describe_delete_acls_rpcs(secure):
    from kio.schema.create_acls.v3 import request as create
    from kio.schema.delete_acls.v3 import request as delete
    from kio.schema.describe_acls.v3 import request as describe

    name = f"rpc-{uuid.uuid4().hex[:6]}"
    creation = create.AclCreation(
        resource_type=3,
        resource_name=name,
        resource_pattern_type=4,
        principal="User:erin",
        host="*",
        operation=3,
        permission_type=3,
    )  # ALLOW User:erin READ on GROUP PREFIXED name
    bad = create.AclCreation(
        resource_type=3,
        resource_name=name,
        resource_pattern_type=3,
        principal="erin",
        host="*",
        operation=3,
        permission_type=3,
    )
    wanted = describe.DescribeAclsRequest(
        resource_type_filter=3,
        resource_name_filter=name,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    with KafkaConnection(secure.sasl) as bob:
        assert bob.plain("bob", PASSWORDS["bob"]).error_code == 0
        refused = bob.call(create.CreateAclsRequest(creations=(creation,)))
        assert refused.results[0].error_code.value == 31  # CLUSTER_AUTHORIZATION_FAILED
        assert bob.call(wanted).error_code.value == 31
    with KafkaConnection(secure.sasl) as admin:
        assert admin.plain("admin", PASSWORDS["admin"]).error_code == 0
        made = admin.call(create.CreateAclsRequest(creations=(creation, bad)))
        assert [r.error_code.value for r in made.results] == [0, 42]  # the bad principal
        found = admin.call(wanted)
        assert [
            (r.resource_name, r.pattern_type, [a.principal for a in r.acls])
            for r in found.resources
        ] == [(name, 4, ["User:erin"])]
        gone = admin.call(
            delete.DeleteAclsRequest(
                filters=(
                    delete.DeleteAclsFilter(
                        resource_type_filter=3,
                        resource_name_filter=name,
                        pattern_type_filter=1,
                        principal_filter="User:erin",
                        host_filter=None,
                        operation=1,
                        permission_type=1,
                    ),
                )
            )
        )
        assert [m.resource_name for m in gone.filter_results[0].matching_acls] == [name]
        assert admin.call(wanted).resources == ()
