"""A pass-through request for a topic the principal may not use is answered, in every served
version, with TOPIC_AUTHORIZATION_FAILED for each of its partitions, and the answer encodes."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from kio.index import load_request_schema, load_response_schema

from shareproxy.kafka.dispatch import SERVED
from shareproxy.kafka.handlers.forward import _DENIED, _SHAPES, _errors_response
from shareproxy.protocol.codec import Request, decode_response, encode_response_chunks


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
