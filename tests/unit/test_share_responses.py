"""ShareFetch and ShareAcknowledge responses encoded by hand are byte for byte kio's encoding of
the same response, for every version served, and record batches travel uncopied."""

from datetime import timedelta
from uuid import UUID

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.record_views import RecordViews
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import encode_response, encode_response_chunks, response_type
from shareproxy.protocol.share_responses import Head, share_acknowledge, share_fetch

T1 = UUID("00000000-0000-0000-0000-000000000001")
T2 = UUID("f0000000-0000-0000-0000-0000000000ff")
BATCH = bytes(range(256)) * 5  # long enough that its length takes a two-byte varint
LONG_MESSAGE = "é" * 100
SPLIT = RecordViews([memoryview(BATCH)[:700], memoryview(BATCH * 2)[700:]])

FETCH_CASES = {
    "empty": ([], [], 0, None),
    "refused": ([], [], 58, "a refusal"),
    "one partition with records": (
        [(T1, [(0, 0, None, 0, None, 1, 7, BATCH, [AcquiredRange(5, 9, 1)])])],
        [],
        0,
        None,
    ),
    "records from two fetches": (
        [(T1, [(0, 0, None, 0, None, 1, 7, SPLIT, [AcquiredRange(5, 9, 1)])])],
        [],
        0,
        None,
    ),
    "empty records, no runs": ([(T1, [(3, 0, None, 0, None, -1, 0, b"", [])])], [], 0, None),
    "errors, several runs, two topics": (
        [
            (
                T1,
                [
                    (0, 6, "not leader", 0, None, 2, 3, b"", []),
                    (1, 0, None, 7, LONG_MESSAGE, 1, 3, memoryview(BATCH)[10:300], []),
                    (2, 0, None, 0, None, 1, 3, b"xy", [AcquiredRange(0, 0, 1)] * 3),
                ],
            ),
            (T2, [(9, 0, None, 0, None, 1, 3, BATCH, [AcquiredRange(2**40, 2**40 + 9, 5)])]),
        ],
        [(2, "host-b", 9093, None), (5, "h", 1, "rack-1")],
        0,
        None,
    ),
}


def _kio(api, version, lock_ms, topics, endpoints, code, message, partition):
    """kio's response of ``api`` (``share_fetch`` or ``share_acknowledge``), each partition's
    entry made by ``partition`` from the schema module and the case's tuple."""
    m = __import__(f"kio.schema.{api}.v{version}.response", fromlist=["_"])
    response = m.ShareFetchResponse if api == "share_fetch" else m.ShareAcknowledgeResponse
    topic = (
        m.ShareFetchableTopicResponse if api == "share_fetch" else m.ShareAcknowledgeTopicResponse
    )
    lock = {"acquisition_lock_timeout": timedelta(milliseconds=lock_ms)}
    return response(
        throttle_time=timedelta(0),
        error_code=KioErrorCode(code),
        error_message=message,
        responses=tuple(
            topic(topic_id=topic_id, partitions=tuple(partition(m, p) for p in partitions))
            for topic_id, partitions in topics
        ),
        node_endpoints=tuple(
            m.NodeEndpoint(node_id=n, host=h, port=port, rack=rack)
            for n, h, port, rack in endpoints
        ),
        **(lock if "acquisition_lock_timeout" in response.__dataclass_fields__ else {}),
    )


def _fetched(m, p):
    return m.PartitionData(
        partition_index=p[0],
        error_code=KioErrorCode(p[1]),
        error_message=p[2],
        acknowledge_error_code=p[3],
        acknowledge_error_message=p[4],
        current_leader=m.LeaderIdAndEpoch(leader_id=p[5], leader_epoch=p[6]),
        records=bytes(p[7]),
        acquired_records=tuple(
            m.AcquiredRecords(
                first_offset=r.first_offset,
                last_offset=r.last_offset,
                delivery_count=r.delivery_count,
            )
            for r in p[8]
        ),
    )


def _kio_fetch(version, lock_ms, topics, endpoints, code, message):
    return _kio("share_fetch", version, lock_ms, topics, endpoints, code, message, _fetched)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", FETCH_CASES)
def test_share_fetch_is_kios_encoding(version, case):
    topics, endpoints, code, message = FETCH_CASES[case]
    ours = share_fetch(Head(version, 30_000, code, message), topics, endpoints)
    theirs = _kio_fetch(version, 30_000, topics, endpoints, code, message)
    assert type(theirs) is response_type(ApiKey.SHARE_FETCH, version)
    assert b"".join(encode_response_chunks(123, ours)) == encode_response(123, theirs)


def test_share_fetch_takes_a_mappings_items_as_its_topics():
    topics = FETCH_CASES["errors, several runs, two topics"][0]
    ours = share_fetch(Head(2, 15_000), dict(topics).items())
    theirs = _kio_fetch(2, 15_000, topics, (), 0, None)
    assert b"".join(encode_response_chunks(-7, ours)) == encode_response(-7, theirs)


def test_record_batches_travel_as_the_objects_they_came_in():
    view = memoryview(BATCH)[1:]
    topics = [(T1, [(0, 0, None, 0, None, 1, 7, BATCH, []), (1, 0, None, 0, None, 1, 7, view, [])])]
    chunks = encode_response_chunks(1, share_fetch(Head(2, 1), topics))
    assert [c for c in chunks if c is BATCH or c is view] == [BATCH, view]
    assert len(chunks) == 5  # header and fields, batch, fields, batch, fields


ACK_CASES = {
    "empty": ([], [], 0, None),
    "refused": ([], [], 69, "not a member"),
    "partitions": (
        [
            (T1, [(0, 0, None, 1, 4), (1, 6, "not leader", 2, 4)]),
            (T2, [(3, 7, LONG_MESSAGE, -1, 4)]),
        ],
        [(2, "host-b", 9093, None)],
        0,
        None,
    ),
}


def _acknowledged(m, p):
    return m.PartitionData(
        partition_index=p[0],
        error_code=KioErrorCode(p[1]),
        error_message=p[2],
        current_leader=m.LeaderIdAndEpoch(leader_id=p[3], leader_epoch=p[4]),
    )


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", ACK_CASES)
def test_share_acknowledge_is_kios_encoding(version, case):
    topics, endpoints, code, message = ACK_CASES[case]
    ours = share_acknowledge(Head(version, 30_000, code, message), topics, endpoints)
    theirs = _kio(
        "share_acknowledge", version, 30_000, topics, endpoints, code, message, _acknowledged
    )
    assert b"".join(encode_response_chunks(5, ours)) == encode_response(5, theirs)


def test_record_batches_from_several_fetches_travel_as_their_views():
    topics = [(T1, [(0, 0, None, 0, None, 1, 7, SPLIT, [])])]
    chunks = encode_response_chunks(1, share_fetch(Head(2, 1), topics))
    assert [c for c in chunks if any(c is v for v in SPLIT)] == SPLIT.views
