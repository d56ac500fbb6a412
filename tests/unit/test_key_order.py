"""Key-ordered share delivery: a keyed record is acquired only when it is the
earliest of its key still to process, and only by the member owning its key's hash range."""

from __future__ import annotations

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.backoff import RedeliveryBackoff
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.key_order import (
    HASH_SPACE,
    NO_KEY,
    UNREADABLE_KEY,
    WHOLE_SPACE,
    key_hash,
    owned_range,
)
from shareproxy.core.persisted import PersistedBatch, PersistedState
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, AcquireMode, RecordState
from shareproxy.protocol.record_keys import batch_key_hashes
from tests.support.kip_tables import ACQ, AV, inflight

ACCEPT, RELEASE = (int(AcknowledgeType.ACCEPT),), (int(AcknowledgeType.RELEASE),)
A, B, C = key_hash(b"a"), key_hash(b"b"), key_hash(b"c")
# offsets 0..5 keyed a, b, a, (none), b, a
KEYS = (A, B, A, NO_KEY, B, A)
LOG = [BatchHeader(0, 5, key_hashes=KEYS)]


def keyed(**limits) -> SharePartition:
    return SharePartition(0, PartitionLimits(key_ordered=True, **limits))


def offsets(acquired: list[AcquiredRange]) -> list[int]:
    return [o for a in acquired for o in range(a.first_offset, a.last_offset + 1)]


def test_only_the_earliest_record_of_each_key_is_acquired_the_rest_wait_undelivered():
    sp = keyed()
    assert offsets(sp.acquire("m", LOG, 0, 100)) == [0, 1, 3]  # a, b and the keyless one
    assert inflight(sp) == [
        (0, 1, ACQ, 1, "m"),
        (2, 2, AV, 0, None),
        (3, 3, ACQ, 1, "m"),
        (4, 5, AV, 0, None),
    ]
    assert sp.acquire("n", LOG, 1, 100) == []  # a and b are each being processed


def test_an_acknowledgement_frees_the_next_record_of_its_key_and_only_it():
    sp = keyed()
    sp.acquire("m", LOG, 0, 100)
    sp.acknowledge("m", [AckBatch(0, 0, ACCEPT)], 1)  # a@0 done: a@2 is next
    assert offsets(sp.acquire("n", LOG, 2, 100)) == [2]
    sp.acknowledge("m", [AckBatch(1, 1, ACCEPT)], 3)  # b@1 done: b@4 is next; a@5 still waits
    assert offsets(sp.acquire("n", LOG, 4, 100)) == [4]


def test_a_released_record_comes_back_before_any_later_record_of_its_key():
    sp = keyed()
    sp.acquire("m", LOG, 0, 100)
    sp.acknowledge("m", [AckBatch(0, 0, RELEASE)], 1)
    got = sp.acquire("n", LOG, 2, 100)
    assert got == [AcquiredRange(0, 0, 2)]  # a@0 again, on its second delivery; a@2 waits


def test_a_lock_timeout_and_a_member_leaving_keep_the_order():
    sp = keyed(record_lock_duration_ms=1_000)
    sp.acquire("m", LOG, 0, 100)
    sp.expire_locks(1_000)
    assert offsets(sp.acquire("n", LOG, 1_001, 100)) == [0, 1, 3]  # the same records again
    sp.release_member("n", 1_002)
    assert sp.acquire("o", LOG, 1_003, 100) == [AcquiredRange(0, 1, 3), AcquiredRange(3, 3, 3)]


def test_a_record_in_its_redelivery_back_off_still_holds_its_key():
    sp = keyed(redelivery_backoff=RedeliveryBackoff(500, 2.0, 1_000))
    sp.acquire("m", LOG, 0, 100)
    sp.acknowledge("m", [AckBatch(0, 0, RELEASE)], 10)  # a@0 waits until 510
    assert sp.acquire("n", LOG, 20, 100) == []  # neither a@0 nor a@2 nor a@5
    assert sp.acquire("n", LOG, 510, 100) == [AcquiredRange(0, 0, 2)]


def test_members_sharing_a_partition_each_take_only_the_keys_they_own():
    sharers = ["m", "n"]
    mine, theirs = owned_range("m", sharers), owned_range("n", sharers)
    assert mine == (0, HASH_SPACE // 2) and theirs == (HASH_SPACE // 2, HASH_SPACE)
    keys = tuple(key_hash(f"k{i}".encode()) for i in range(200))
    log = [BatchHeader(0, 199, key_hashes=keys)]
    sp = keyed(max_record_locks=1_000)
    taken_m = set(offsets(sp.acquire("m", log, 0, 500, owned=mine)))
    taken_n = set(offsets(sp.acquire("n", log, 0, 500, owned=theirs)))
    assert taken_m == {i for i, k in enumerate(keys) if k < HASH_SPACE // 2}
    assert taken_n == set(range(200)) - taken_m
    assert 60 < len(taken_m) < 140  # an even split of 200 distinct keys


def test_keys_are_learned_again_after_a_restart():
    stored = PersistedState(
        0, [PersistedBatch(0, 1, RecordState.AVAILABLE, 1), PersistedBatch(2, 5, AV, 0)]
    )
    sp = SharePartition.from_persisted(stored, PartitionLimits(key_ordered=True))
    assert offsets(sp.acquire("m", LOG, 0, 100)) == [0, 1, 3]


def test_record_limit_is_exact_and_the_in_flight_cap_counts_waiting_records():
    sp = keyed()
    assert offsets(sp.acquire("m", LOG, 0, 2, AcquireMode.RECORD_LIMIT)) == [0, 1]
    assert sp.speo == 2
    capped = keyed(max_record_locks=100)
    same = tuple([A] * 150)
    assert offsets(capped.acquire("m", [BatchHeader(0, 149, key_hashes=same)], 0, 500)) == [0]
    assert capped.speo == 100  # 99 records of a wait in flight; nothing more is read


def test_without_key_ordering_the_keys_are_ignored():
    sp = SharePartition(0, PartitionLimits())
    assert sp.acquire("m", LOG, 0, 100) == [AcquiredRange(0, 5, 1)]


def test_owned_range_splits_the_whole_space_evenly_in_member_id_order():
    members = ["c", "a", "b"]
    ranges = [owned_range(m, members) for m in ("a", "b", "c")]
    assert ranges[0][0] == 0 and ranges[-1][1] == HASH_SPACE
    assert all(ranges[i][1] == ranges[i + 1][0] for i in range(2))
    assert owned_range("a", ["a"]) == WHOLE_SPACE


def test_keys_are_read_from_compressed_batches():
    for codec in (0, 1, 2, 3, 4):  # none, gzip, snappy, lz4, zstd
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
        for i in range(5):
            builder.append(
                i, timestamp=0, key=b"k%d" % (i % 2) if i != 2 else None, value=b"v", headers=[]
            )
        data = bytes(builder.build())
        assert batch_key_hashes(data, 0, 4) == (
            key_hash(b"k0"),
            key_hash(b"k1"),
            NO_KEY,
            key_hash(b"k1"),
            key_hash(b"k0"),
        ), codec


def test_records_acquired_before_key_order_was_turned_on_hold_every_key_until_they_end():
    sp = SharePartition(0, PartitionLimits())
    assert sp.acquire("m", [BatchHeader(0, 1, key_hashes=KEYS[:2])], 0, 100) == [
        AcquiredRange(0, 1, 1)
    ]  # a@0, b@1 taken unordered
    sp.limits = PartitionLimits(key_ordered=True)
    sp.unordered_until = sp.speo - 1  # as the leader marks it when the config turns on
    assert offsets(sp.acquire("n", LOG, 1, 100)) == [3]  # only the keyless record goes
    sp.acknowledge("m", [AckBatch(0, 1, ACCEPT)], 2)
    assert offsets(sp.acquire("n", LOG, 3, 100)) == [2, 4]  # a@2 and b@4 now, in order


def test_a_batch_whose_keys_cannot_be_read_is_ordered_as_one_key():
    builder = DefaultRecordBatchBuilder(2, 1, 0, -1, -1, -1, 1 << 20)
    for i in range(3):
        builder.append(i, timestamp=0, key=b"k", value=b"v" * 100, headers=[])
    data = bytearray(builder.build())
    data[-20] ^= 0xFF  # inside the gzip stream
    hashes = batch_key_hashes(bytes(data), 0, 2)
    assert hashes == (UNREADABLE_KEY,) * 3  # delivered, never a stalled partition
