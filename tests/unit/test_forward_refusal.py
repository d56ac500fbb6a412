"""A pass-through request for a topic the principal may not use is answered, in every served
version, with TOPIC_AUTHORIZATION_FAILED for each of its partitions, and the answer encodes; the
values Kafka's broker refuses (forward_rules.py) are answered with Kafka's codes, never sent."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from kio.index import load_request_schema, load_response_schema

from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.dispatch import SERVED
from shareproxy.kafka.handlers.forward import _DENIED, _SHAPES, _errors_response
from shareproxy.kafka.handlers.relay import answer_error
from shareproxy.kafka.routes import ROUTES
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import Request, decode_response, encode_response_chunks
from shareproxy.protocol.forward_rules import partition_problem, relay_problem, request_problem


def _entity(cls: type, **values: object) -> object:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _request(api_key: int, version: int) -> object:
    cls = load_request_schema(api_key, version)
    m = __import__(cls.__module__, fromlist=["x"])
    if api_key == 0:
        part = _entity(m.PartitionProduceData, index=2, records=b"")
        topic = _entity(m.TopicProduceData, name="t", partition_data=(part,))
        return _entity(
            cls, acks=-1, timeout=timedelta(seconds=1), topic_data=(topic,), transactional_id=None
        )
    if api_key == 1:
        part = _entity(m.FetchPartition, partition=2, fetch_offset=0, partition_max_bytes=1)
        topic = _entity(m.FetchTopic, topic="t", partitions=(part,))
        return _entity(
            cls, max_wait=timedelta(0), min_bytes=1, topics=(topic,), forgotten_topics_data=()
        )
    part = _entity(m.ListOffsetsPartition, partition_index=2, timestamp=-1)
    topic = _entity(m.ListOffsetsTopic, name="t", partitions=(part,))
    return _entity(cls, replica_id=-1, isolation_level=0, topics=(topic,))


@pytest.mark.parametrize(
    "api_key, version",
    [(k, v) for k in (0, 1, 2) for v in range(SERVED[k][0], SERVED[k][1] + 1)],
)
def test_refused_topics_get_topic_authorization_failed_per_partition(api_key, version):
    body = _request(api_key, version)
    topics_f, _, _, _, resp_f = _SHAPES[api_key]
    request = Request(api_key, version, 1, "t", body)
    refused = [
        (t, list(t.partition_data if api_key == 0 else t.partitions), 29, _DENIED)
        for t in getattr(body, topics_f)
    ]
    answer = _errors_response(request, [], refused)
    frame = b"".join(encode_response_chunks(1, answer))[4:]
    _, decoded = decode_response(frame, load_response_schema(api_key, version))
    assert decoded == answer
    (topic,) = getattr(decoded, resp_f)
    (part,) = next(
        getattr(topic, f.name)
        for f in dataclasses.fields(topic)
        if isinstance(getattr(topic, f.name), tuple)
    )
    assert part.error_code.value == 29
    assert getattr(part, "index", getattr(part, "partition_index", None)) == 2


def _partition(api_key: int, version: int, **values: object) -> object:
    topics_f, _, parts_f, _, _ = _SHAPES[api_key]
    (topic,) = getattr(_request(api_key, version), topics_f)
    (part,) = getattr(topic, parts_f)
    return dataclasses.replace(part, **values)


@pytest.mark.parametrize("api_key", [1, 2])  # and Produce, whose empty records are refused
def test_a_negative_partition_is_unknown_and_never_sent(api_key):
    _, _, _, index_f, _ = _SHAPES[api_key]
    version = SERVED[api_key][1]
    part = _partition(api_key, version, **{index_f: -7})
    code, _ = partition_problem(api_key, version, part, -7)
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    part = _partition(api_key, version, **{index_f: 0})
    assert partition_problem(api_key, version, part, 0) is None


def test_a_produce_with_acks_other_than_all_none_or_leader_is_refused():
    body = _request(ApiKey.PRODUCE, 9)
    for acks in (-1, 0, 1):
        assert request_problem(ApiKey.PRODUCE, 9, dataclasses.replace(body, acks=acks)) is None
    for acks in (2, -2, 32767):
        code, _ = request_problem(ApiKey.PRODUCE, 9, dataclasses.replace(body, acks=acks))
        assert code == ErrorCode.INVALID_REQUIRED_ACKS


def test_delete_records_below_the_high_watermark_marker_is_out_of_range():
    from kio.schema.delete_records.v2 import request as dr

    def problem(offset: int):
        part = dr.DeleteRecordsPartition(partition_index=0, offset=offset)
        return partition_problem(ApiKey.DELETE_RECORDS, 2, part, 0)

    assert problem(-1) is None  # up to the high watermark
    assert problem(5) is None
    assert problem(-2)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert problem(-(2**63))[0] == ErrorCode.OFFSET_OUT_OF_RANGE


def _relayed(api_key: ApiKey, **values: object) -> tuple[int, object]:
    version = SERVED[api_key][1]
    cls = load_request_schema(api_key, version)
    m = __import__(cls.__module__, fromlist=["x"])
    defaults = {
        ApiKey.JOIN_GROUP: lambda: dict(
            group_id="g",
            session_timeout=timedelta(seconds=10),
            rebalance_timeout=timedelta(seconds=10),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        ),
        ApiKey.HEARTBEAT: lambda: dict(
            group_id="g", generation_id=1, member_id="m", group_instance_id=None
        ),
        ApiKey.INIT_PRODUCER_ID: lambda: dict(
            transactional_id="tx",
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        ),
    }[api_key]()
    return version, cls(**{**defaults, **values})


@pytest.mark.parametrize(
    "api_key, values, code",
    [
        (ApiKey.JOIN_GROUP, {"group_id": ""}, ErrorCode.INVALID_GROUP_ID),
        (ApiKey.HEARTBEAT, {"group_id": ""}, ErrorCode.INVALID_GROUP_ID),
        (
            ApiKey.INIT_PRODUCER_ID,
            {"transaction_timeout": timedelta(0)},
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ),
        (
            ApiKey.INIT_PRODUCER_ID,
            {"transaction_timeout": timedelta(milliseconds=-(2**31))},
            ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ),
    ],
)
def test_relayed_requests_kafka_refuses_whole_are_answered_mirroring_the_request(
    api_key, values, code
):
    version, good = _relayed(api_key)
    assert relay_problem(api_key, good) is None
    bad = dataclasses.replace(good, **values)
    problem = relay_problem(api_key, bad)
    assert problem is not None and problem[0] == code
    request = Request(api_key, version, 1, "t", bad)
    answer = answer_error(request, ROUTES[api_key], *problem)
    frame = b"".join(encode_response_chunks(1, answer))[4:]
    _, decoded = decode_response(frame, load_response_schema(api_key, version))
    assert decoded.error_code == code


def test_an_idempotent_producer_has_no_transaction_timeout_to_check():
    _, body = _relayed(
        ApiKey.INIT_PRODUCER_ID, transactional_id=None, transaction_timeout=timedelta(0)
    )
    assert relay_problem(ApiKey.INIT_PRODUCER_ID, body) is None
