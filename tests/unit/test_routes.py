"""The routing table of relayed APIs: what each needs (Kafka's ACL table per API), how a refusal
answers (mirroring the request, as Kafka's brokers do), and what ApiVersions advertises."""

from __future__ import annotations

from datetime import timedelta

from kio.schema.add_partitions_to_txn.v3 import request as add_req
from kio.schema.add_partitions_to_txn.v3 import response as add_resp
from kio.schema.create_topics.v7 import request as create_req
from kio.schema.create_topics.v7 import response as create_resp
from kio.schema.offset_commit.v9 import request as commit_req
from kio.schema.offset_commit.v9 import response as commit_resp

from shareproxy.core.acl import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    authorize_any,
)
from shareproxy.kafka.dispatch import OWN, SERVED, advertised
from shareproxy.kafka.routes import ROUTES, Via, entry_refusals, refusal
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.error_response import error_entity
from shareproxy.protocol.forward_rules import create_topics_problems


def _grants(*allowed: tuple[Operation, ResourceType, str]):
    def allowed_fn(op, rt, name, audit=True):
        return (op, rt, name) in allowed

    return allowed_fn


def _commit() -> commit_req.OffsetCommitRequest:
    part = commit_req.OffsetCommitRequestPartition(
        partition_index=3, committed_offset=7, committed_leader_epoch=-1, committed_metadata=None
    )
    return commit_req.OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id="m",
        group_instance_id=None,
        topics=(commit_req.OffsetCommitRequestTopic(name="t", partitions=(part,)),),
    )


def test_an_offset_commit_needs_read_on_its_group_then_on_each_topic():
    route = ROUTES[ApiKey.OFFSET_COMMIT]
    assert route.via is Via.GROUP and route.key(_commit()) == "g"
    assert refusal(_grants(), route, _commit())[0] == 30  # GROUP_AUTHORIZATION_FAILED
    group_only = _grants((Operation.READ, ResourceType.GROUP, "g"))
    assert refusal(group_only, route, _commit()) is None  # the topic is refused alone
    assert {i: code for i, (code, _) in entry_refusals(group_only, route, _commit()).items()} == {
        0: 29  # TOPIC_AUTHORIZATION_FAILED
    }
    both = _grants(
        (Operation.READ, ResourceType.GROUP, "g"), (Operation.READ, ResourceType.TOPIC, "t")
    )
    assert refusal(both, route, _commit()) is None
    assert entry_refusals(both, route, _commit()) == {}


def test_offsets_of_all_topics_show_only_the_topics_the_principal_may_describe():
    from kio.schema.offset_fetch.v7 import request as fetch_req
    from kio.schema.offset_fetch.v7 import response as fetch_resp

    from shareproxy.kafka.handlers.relay import _asks_all, _hidden
    from shareproxy.protocol.codec import Request

    route = ROUTES[ApiKey.OFFSET_FETCH]
    body = fetch_req.OffsetFetchRequest(group_id="g", topics=None, require_stable=False)
    assert _asks_all(route, body)
    part = fetch_resp.OffsetFetchResponsePartition(
        partition_index=0, committed_offset=5, metadata="", error_code=0
    )
    answer = fetch_resp.OffsetFetchResponse(
        throttle_time=timedelta(0),
        topics=tuple(
            fetch_resp.OffsetFetchResponseTopic(name=n, partitions=(part,)) for n in ("a", "b")
        ),
        error_code=0,
    )
    seen = _grants((Operation.DESCRIBE, ResourceType.TOPIC, "a"))
    request = Request(api_key=9, api_version=7, correlation_id=1, client_id=None, body=body)
    assert [t.name for t in _hidden(seen, route, request, answer).topics] == ["a"]
    unreadable = _hidden(seen, route, request, None)  # never passed on unread
    assert (unreadable.error_code, unreadable.topics) == (-1, ())


def test_create_topics_takes_create_on_the_cluster_instead_of_each_topic():
    topic = create_req.CreatableTopic(
        name="new", num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    body = create_req.CreateTopicsRequest(
        topics=(topic,), timeout=timedelta(seconds=1), validate_only=False
    )
    route = ROUTES[ApiKey.CREATE_TOPICS]
    assert entry_refusals(_grants(), route, body)[0][0] == 29
    mine = _grants((Operation.CREATE, ResourceType.TOPIC, "new"))
    assert entry_refusals(mine, route, body) == {}
    cluster = _grants((Operation.CREATE, ResourceType.CLUSTER, "kafka-cluster"))
    assert entry_refusals(cluster, route, body) == {}


def test_a_refusal_answers_every_partition_the_request_named():
    answer = error_entity(commit_resp.OffsetCommitResponse, 30, "no", _commit())
    (topic,) = answer.topics
    assert topic.name == "t"
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(3, 30)]


def test_a_refused_add_partitions_to_txn_names_its_partitions_under_kafkas_field_names():
    body = add_req.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=(add_req.AddPartitionsToTxnTopic(name="t", partitions=(0, 2)),),
    )
    route = ROUTES[ApiKey.ADD_PARTITIONS_TO_TXN]
    assert route.key(body) == "tx"
    assert refusal(_grants(), route, body)[0] == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    answer = error_entity(add_resp.AddPartitionsToTxnResponse, 53, None, body, route.mirror)
    (topic,) = answer.results_by_topic_v3_and_below
    assert topic.name == "t"
    assert [(p.partition_index, p.partition_error_code) for p in topic.results_by_partition] == [
        (0, 53),
        (2, 53),
    ]


def test_a_refused_create_topics_names_each_topic():
    topic = create_req.CreatableTopic(
        name="new", num_partitions=3, replication_factor=1, assignments=(), configs=()
    )
    body = create_req.CreateTopicsRequest(
        topics=(topic,), timeout=timedelta(seconds=1), validate_only=False
    )
    (result,) = error_entity(create_resp.CreateTopicsResponse, 29, "no", body).topics
    assert (result.name, result.error_code, result.error_message) == ("new", 29, "no")


def test_write_on_any_topic_is_what_an_idempotent_producer_needs():
    def rule(name: str, pattern: PatternType, permission: Permission) -> AclBinding:
        return AclBinding(
            "User:p", "*", ResourceType.TOPIC, name, pattern, Operation.WRITE, permission
        )

    allow = rule("orders", PatternType.LITERAL, Permission.ALLOW)
    assert authorize_any([allow], "User:p", "h", Operation.WRITE, ResourceType.TOPIC).allowed
    assert not authorize_any([allow], "User:q", "h", Operation.WRITE, ResourceType.TOPIC).allowed
    assert not authorize_any([], "User:p", "h", Operation.WRITE, ResourceType.TOPIC).allowed
    deny_all = rule("*", PatternType.LITERAL, Permission.DENY)
    assert not authorize_any(
        [allow, deny_all], "User:p", "h", Operation.WRITE, ResourceType.TOPIC
    ).allowed
    deny_one = rule("orders", PatternType.LITERAL, Permission.DENY)
    other = rule("audit", PatternType.LITERAL, Permission.ALLOW)
    assert authorize_any(
        [deny_one, other], "User:p", "h", Operation.WRITE, ResourceType.TOPIC
    ).allowed


def test_api_versions_advertise_own_apis_whole_and_relayed_ones_where_upstream_agrees():
    upstream = {ApiKey.JOIN_GROUP: (2, 5), ApiKey.PRODUCE: (0, 9), ApiKey.FETCH: (13, 17)}
    out = advertised(upstream)
    assert out[ApiKey.JOIN_GROUP] == (max(2, SERVED[ApiKey.JOIN_GROUP][0]), 5)
    assert out[ApiKey.PRODUCE] == (SERVED[ApiKey.PRODUCE][0], 9)
    assert ApiKey.FETCH not in out  # no version in common
    assert ApiKey.CREATE_TOPICS not in out  # the upstream has none
    assert all(out[k] == SERVED[k] for k in OWN)
    assert ApiKey.SHARE_FETCH in OWN and ApiKey.JOIN_GROUP not in OWN


def _creatable(name: str, partitions: int, replication: int = 1) -> create_req.CreatableTopic:
    return create_req.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=(),
        configs=(),
    )


def test_create_topics_refuses_what_kafkas_controller_refuses_before_it_goes_upstream():
    def problems(*topics):
        body = create_req.CreateTopicsRequest(
            topics=topics, timeout=timedelta(seconds=1), validate_only=False
        )
        return {i: int(code) for i, (code, _) in create_topics_problems(body).items()}

    assert problems(_creatable("a", 3), _creatable("b", -1, -1)) == {}
    assert problems(_creatable("a", 3), _creatable("b", 0)) == {1: 37}  # INVALID_PARTITIONS
    assert problems(_creatable("a", -5)) == {0: 37}
    assert problems(_creatable("a", 1, 0)) == {0: 38}  # INVALID_REPLICATION_FACTOR
    # more than 10,000 records in one request: POLICY_VIOLATION for every topic, as Kafka
    assert problems(_creatable("a", 9_000), _creatable("b", 2_000)) == {0: 44, 1: 44}
    assert problems(_creatable("a", 2_000_000_000)) == {0: 44}
    # a name Kafka's Topic.validate refuses: INVALID_TOPIC_EXCEPTION, counting no records
    assert problems(_creatable("a b", 3), _creatable("ok", 3)) == {0: 17}
    assert problems(_creatable("", 3), _creatable("..", 3), _creatable("é", 1)) == {
        0: 17,
        1: 17,
        2: 17,
    }
    assert problems(_creatable("x" * 250, 2_000_000_000)) == {0: 17}
