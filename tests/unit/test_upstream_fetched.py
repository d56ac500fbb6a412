"""The proxy's own Fetch v12 response reader reads what kio reads, tagged fields and aborted
transactions included, and leaves the records as views into the frame."""

from __future__ import annotations

import datetime
import io
import random
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fr
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import i32, i64

from shareproxy.protocol.codec import reader_for, writer_for
from shareproxy.upstream.fetched import FetchViews, read_fetch_response


def _partition(rnd: random.Random, index: int) -> fr.PartitionData:
    records = rnd.choice([None, b"", rnd.randbytes(rnd.choice([1, 200, 130, 70_000]))])
    return fr.PartitionData(
        partition_index=i32(index),
        error_code=rnd.choice([ErrorCode.none, ErrorCode.not_leader_or_follower]),
        high_watermark=i64(rnd.randrange(2**40)),
        last_stable_offset=i64(rnd.choice([-1, rnd.randrange(2**40)])),
        log_start_offset=i64(rnd.randrange(2**33)),
        diverging_epoch=rnd.choice(
            [fr.EpochEndOffset(), fr.EpochEndOffset(epoch=i32(3), end_offset=i64(9))]
        ),
        current_leader=rnd.choice(
            [fr.LeaderIdAndEpoch(), fr.LeaderIdAndEpoch(leader_id=BrokerId(2), leader_epoch=i32(5))]
        ),
        snapshot_id=rnd.choice([fr.SnapshotId(), fr.SnapshotId(end_offset=i64(7), epoch=i32(1))]),
        aborted_transactions=rnd.choice(
            [
                None,
                (),
                tuple(
                    fr.AbortedTransaction(
                        producer_id=ProducerId(rnd.randrange(2**40)),
                        first_offset=i64(rnd.randrange(2**40)),
                    )
                    for _ in range(rnd.randrange(1, 4))
                ),
            ]
        ),
        preferred_read_replica=BrokerId(rnd.choice([-1, 1])),
        records=records,
    )


def _response(seed: int) -> fr.FetchResponse:
    rnd = random.Random(seed)
    return fr.FetchResponse(
        throttle_time=datetime.timedelta(milliseconds=rnd.randrange(100)),
        error_code=ErrorCode.none,
        session_id=i32(rnd.randrange(1000)),
        responses=tuple(
            fr.FetchableTopicResponse(
                topic=TopicName(f"topic-é{t}" * rnd.randrange(1, 40)),
                partitions=tuple(_partition(rnd, p) for p in range(rnd.randrange(0, 5))),
            )
            for t in range(rnd.randrange(0, 4))
        ),
    )


@pytest.mark.parametrize("seed", range(40))
def test_it_reads_what_kio_reads(seed):
    response = _response(seed)
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x07\x00")  # a response header v1: correlation id, no tags
    writer_for(fr.FetchResponse)(buf, response)
    frame = buf.getvalue()
    expected, _ = reader_for(fr.FetchResponse)(frame, 5)
    _, got = read_fetch_response(frame, 5)
    want = [(t.topic, p) for t in expected.responses for p in t.partitions]
    assert len(got) == len(want)
    for (topic, index, data), (kio_topic, p) in zip(got, want, strict=True):
        assert (topic, index) == (kio_topic, p.partition_index)
        assert data.error_code == p.error_code
        assert data.high_watermark == p.high_watermark
        assert data.last_stable_offset == p.last_stable_offset
        assert data.log_start_offset == p.log_start_offset
        assert bytes(data.records) == (p.records or b"")
        assert data.aborted == [
            (a.producer_id, a.first_offset) for a in p.aborted_transactions or ()
        ]
        if p.records:
            assert isinstance(data.records, memoryview) and data.records.obj is frame
    data_in = io.BytesIO(frame)
    data_in.seek(5)
    assert [(t, i) for t, i, _ in FetchViews().decode(data_in)] == [(t, i) for t, i, _ in got]


def test_a_truncated_response_raises():
    response = _response(3)
    buf = io.BytesIO()
    writer_for(fr.FetchResponse)(buf, response)
    frame = buf.getvalue()
    for cut in (1, len(frame) // 2, len(frame) - 1):
        with pytest.raises((ValueError, IndexError, struct.error)):
            read_fetch_response(frame[:cut], 0)
