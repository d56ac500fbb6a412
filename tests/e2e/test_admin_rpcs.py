"""The Kafka admin RPCs for share groups, as real encoded requests (kio types), agree with the
REST API and refuse what it refuses."""

from __future__ import annotations

import uuid

import httpx
from kio.schema.alter_share_group_offsets.v0 import request as alter
from kio.schema.delete_groups.v2 import request as delete_groups
from kio.schema.delete_share_group_offsets.v0 import request as delete_offsets
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.describe_share_group_offsets.v1 import request as describe_offsets
from kio.schema.incremental_alter_configs.v1 import request as alter_configs
from kio.schema.list_groups.v5 import request as list_groups

from tests.support.consumers import accept_all, share_consumer, wait_for
from tests.support.kafka_client import call

GROUP_RESOURCE = 32


def test_admin_rpcs_agree_with_rest_and_refuse_what_it_refuses(proxy, broker, topic, produce):
    p = proxy()
    t = topic(2)
    produce(t, 40, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    http = httpx.Client(base_url=p.admin_url, timeout=30)
    try:
        assert len(accept_all(c, 40)) == 40
        wait_for(lambda: http.get(f"/v1/share-groups/{group}/offsets").json()["total_lag"] == 0)

        listed = call(p.port, list_groups.ListGroupsRequest(states_filter=(), types_filter=()))
        assert (group, "Stable", "share") in {
            (g.group_id, g.group_state, g.group_type) for g in listed.groups
        }
        only_classic = call(
            p.port, list_groups.ListGroupsRequest(states_filter=(), types_filter=("classic",))
        )
        # the share group is filtered out; what is left are the cluster's own classic groups
        assert group not in {g.group_id for g in only_classic.groups}
        assert {g.group_type for g in only_classic.groups} <= {"classic"}

        described = call(
            p.port,
            describe_offsets.DescribeShareGroupOffsetsRequest(
                groups=(
                    describe_offsets.DescribeShareGroupOffsetsRequestGroup(
                        group_id=group, topics=None
                    ),
                )
            ),
        )
        rest = http.get(f"/v1/share-groups/{group}/offsets").json()["partitions"]
        rpc = {
            (tp.topic_name, part.partition_index): (part.start_offset, part.lag)
            for tp in described.groups[0].topics
            for part in tp.partitions
        }
        assert rpc == {(x["topic"], x["partition"]): (x["start_offset"], x["lag"]) for x in rest}
        assert rpc == {(t, 0): (20, 0), (t, 1): (20, 0)}
        # a topic the cluster does not have fails its own partitions, not the group (as Kafka)
        named = call(
            p.port,
            describe_offsets.DescribeShareGroupOffsetsRequest(
                groups=(
                    describe_offsets.DescribeShareGroupOffsetsRequestGroup(
                        group_id=group,
                        topics=(
                            describe_offsets.DescribeShareGroupOffsetsRequestTopic(
                                topic_name=t, partitions=(0,)
                            ),
                            describe_offsets.DescribeShareGroupOffsetsRequestTopic(
                                topic_name="no-such-topic", partitions=(0, 1)
                            ),
                        ),
                    ),
                )
            ),
        ).groups[0]
        assert named.error_code.value == 0
        assert {
            (tp.topic_name, part.partition_index): (part.error_code.value, part.start_offset)
            for tp in named.topics
            for part in tp.partitions
        } == {(t, 0): (0, 20), ("no-such-topic", 0): (3, -1), ("no-such-topic", 1): (3, -1)}

        start_at_5 = alter.AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=(
                alter.AlterShareGroupOffsetsRequestTopic(
                    topic_name=t,
                    partitions=(
                        alter.AlterShareGroupOffsetsRequestPartition(
                            partition_index=0, start_offset=5
                        ),
                    ),
                ),
            ),
        )
        refused = call(p.port, start_at_5)
        assert refused.error_code.value == 68  # NON_EMPTY_GROUP
        no_delete = call(
            p.port,
            delete_offsets.DeleteShareGroupOffsetsRequest(
                group_id=group,
                topics=(delete_offsets.DeleteShareGroupOffsetsRequestTopic(topic_name=t),),
            ),
        )
        # Kafka refuses a group with members whole, at the group level (not per topic)
        assert (no_delete.error_code.value, no_delete.responses) == (68, ())  # NON_EMPTY_GROUP
        busy = call(p.port, delete_groups.DeleteGroupsRequest(groups_names=(group,)))
        assert busy.results[0].error_code.value == 68
        # with an upstream group beside it, the share group keeps its own answer: only the
        # other id goes upstream
        mixed = call(p.port, delete_groups.DeleteGroupsRequest(groups_names=(group, "nobody")))
        first = mixed.results[0]
        assert (first.group_id, first.error_code.value) == (group, 68)

        c.close()
        wait_for(lambda: http.get(f"/v1/share-groups/{group}").json()["state"] == "Empty")
        altered = call(p.port, start_at_5)
        assert altered.error_code.value == 0
        assert [x.error_code.value for r in altered.responses for x in r.partitions] == [0]
        after = http.get(f"/v1/share-groups/{group}/offsets").json()["partitions"]
        assert {x["partition"]: (x["start_offset"], x["lag"]) for x in after} == {
            0: (5, 15),
            1: (20, 0),
        }

        def alter_group_config(name: str, value: str):
            return call(
                p.port,
                alter_configs.IncrementalAlterConfigsRequest(
                    resources=(
                        alter_configs.AlterConfigsResource(
                            resource_type=GROUP_RESOURCE,
                            resource_name=group,
                            configs=(
                                alter_configs.AlterableConfig(
                                    name=name, config_operation=0, value=value
                                ),
                            ),
                        ),
                    ),
                    validate_only=False,
                ),
            )

        set_lock = alter_group_config("share.record.lock.duration.ms", "15000")
        assert set_lock.responses[0].error_code.value == 0
        bad = alter_group_config("share.delivery.count.limit", "99")
        assert bad.responses[0].error_code.value == 40  # INVALID_CONFIG
        shown = call(
            p.port,
            describe_configs.DescribeConfigsRequest(
                resources=(
                    describe_configs.DescribeConfigsResource(
                        resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=None
                    ),
                ),
                include_synonyms=False,
                include_documentation=True,
            ),
        )
        configs = {e.name: (e.value, e.config_source) for e in shown.results[0].configs}
        assert configs["share.record.lock.duration.ms"] == ("15000", 8)
        assert configs["share.delivery.count.limit"] == ("5", 5)
        rest_config = http.get(f"/v1/share-groups/{group}/config").json()["configs"]
        assert {n: e["value"] for n, e in rest_config.items()} == {
            n: v for n, (v, _) in configs.items()
        }

        deleted = call(
            p.port,
            delete_offsets.DeleteShareGroupOffsetsRequest(
                group_id=group,
                topics=(delete_offsets.DeleteShareGroupOffsetsRequestTopic(topic_name=t),),
            ),
        )
        assert [r.error_code.value for r in deleted.responses] == [0]
        assert http.get(f"/v1/share-groups/{group}/offsets").json()["partitions"] == []
        again = call(
            p.port,
            delete_offsets.DeleteShareGroupOffsetsRequest(
                group_id=group,
                topics=(delete_offsets.DeleteShareGroupOffsetsRequestTopic(topic_name=t),),
            ),
        )
        # no state left for the topic: UNKNOWN_TOPIC_OR_PARTITION, as Kafka's coordinator
        assert [(r.error_code.value, r.error_message) for r in again.responses] == [
            (3, "There is no offset information to delete.")
        ]
        gone = call(p.port, delete_groups.DeleteGroupsRequest(groups_names=(group, "nobody")))
        # a group id that is not a share group is the upstream cluster's to answer (Kafka:
        # GROUP_ID_NOT_FOUND; Tansu: NONE)
        upstream = call(broker.port, delete_groups.DeleteGroupsRequest(groups_names=("nobody",)))
        assert [(r.group_id, r.error_code) for r in gone.results] == [
            (group, 0),
            ("nobody", upstream.results[0].error_code),
        ]
        assert http.get(f"/v1/share-groups/{group}").status_code == 404
    finally:
        http.close()


def test_share_group_describe_answers_what_rest_describes(proxy, topic, produce):
    from kio.schema.share_group_describe.v1 import request as describe

    p = proxy()
    t = topic(2)
    produce(t, 10, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    try:
        assert len(accept_all(c, 10)) == 10
        rest = httpx.get(f"{p.admin_url}/v1/share-groups/{group}", timeout=30).json()
        answer = call(
            p.port,
            describe.ShareGroupDescribeRequest(
                group_ids=(group, "never-joined"), include_authorized_operations=False
            ),
        )
        live, absent = answer.groups
        assert (live.group_id, live.group_state, live.group_epoch, live.assignment_epoch) == (
            group,
            rest["state"],
            rest["group_epoch"],
            rest["assignment_epoch"],
        )
        assert [
            (
                m.member_id,
                list(m.subscribed_topic_names),
                {tp.topic_name: list(tp.partitions) for tp in m.assignment.topic_partitions},
            )
            for m in live.members
        ] == [(m["member_id"], m["subscriptions"], m["assignment"]) for m in rest["members"]]
        assert {tp.topic_name for m in live.members for tp in m.assignment.topic_partitions} == {t}
        assert live.assignor_name == "sticky-balanced"  # the proxy's own, not Kafka's "simple"
        assert live.authorized_operations == -(2**31)  # not asked for
        asked = call(
            p.port,
            describe.ShareGroupDescribeRequest(
                group_ids=(group,), include_authorized_operations=True
            ),
        )
        # authorization off: every group operation (READ, DESCRIBE, DELETE, *_CONFIGS)
        assert asked.groups[0].authorized_operations == sum(1 << op for op in (3, 6, 8, 10, 11))
        assert absent.error_code == 69  # GROUP_ID_NOT_FOUND
    finally:
        c.close()
