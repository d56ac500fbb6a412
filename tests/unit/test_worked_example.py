"""KIP-932's worked example ("Managing durable share-partition state"), row for row.

Each step checks the cumulative in-flight state and the WriteShareGroupState the step produces
(StartOffset, -1 when it did not move, and StateBatches). Consumers 1-3 are members c1-c3.
Acquisitions in the example are not written.
"""

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.persisted import PersistedState, StateDelta
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, AcquireMode
from tests.support.kip_tables import ACK, ACQ, AV, inflight, pb

ACCEPT = (int(AcknowledgeType.ACCEPT),)
RELEASE = (int(AcknowledgeType.RELEASE),)
LOCK_MS = 30_000


def test_kip_932_worked_example():
    limits = PartitionLimits(record_lock_duration_ms=LOCK_MS)
    store = PersistedState()  # what the share coordinator accumulates from the writes

    def written(delta: StateDelta) -> StateDelta:
        store.apply(delta)
        return delta

    # Starting state of topic-partition with latest offset 100.
    sp, delta = SharePartition.initialized(100, limits)
    assert (sp.spso, sp.speo) == (100, 100)
    assert written(delta) == StateDelta(100, ())

    # --- The batched case with successful processing ---
    # Fetch records 100-109.
    got = sp.acquire("c1", [BatchHeader(100, 109)], now_ms=0, max_records=500)
    assert got == [AcquiredRange(100, 109, 1)]
    assert (sp.spso, sp.speo) == (100, 110)
    assert inflight(sp) == [(100, 109, ACQ, 1, "c1")]

    # Acknowledge 100-109: SPSO moves forward.
    delta = written(sp.acknowledge("c1", [AckBatch(100, 109, ACCEPT)], now_ms=1))
    assert (sp.spso, sp.speo) == (110, 110)
    assert inflight(sp) == []
    assert delta == StateDelta(110, ())

    # --- A messier sequence of release and acknowledge ---
    # Fetch records 110-119: consumer 1 gets 110-112, consumer 2 113-118, consumer 3 119.
    log = [BatchHeader(110, 119)]
    assert sp.acquire("c1", log, 1_000, 3, AcquireMode.RECORD_LIMIT) == [AcquiredRange(110, 112, 1)]
    assert sp.acquire("c2", log, 5_000, 6, AcquireMode.RECORD_LIMIT) == [AcquiredRange(113, 118, 1)]
    assert sp.acquire("c3", log, 5_000, 1, AcquireMode.RECORD_LIMIT) == [AcquiredRange(119, 119, 1)]
    assert (sp.spso, sp.speo) == (110, 120)
    assert inflight(sp) == [
        (110, 112, ACQ, 1, "c1"),
        (113, 118, ACQ, 1, "c2"),
        (119, 119, ACQ, 1, "c3"),
    ]

    # Release 110 (consumer 1).
    delta = written(sp.acknowledge("c1", [AckBatch(110, 110, RELEASE)], now_ms=6_000))
    assert (sp.spso, sp.speo) == (110, 120)
    assert inflight(sp) == [
        (110, 110, AV, 1, None),
        (111, 112, ACQ, 1, "c1"),
        (113, 118, ACQ, 1, "c2"),
        (119, 119, ACQ, 1, "c3"),
    ]
    assert delta == StateDelta(-1, (pb(110, 110, AV, 1),))
    assert store.end_offset == 110  # "the SPEO in the control records is 111 at this point"

    # Acknowledge 119 (consumer 3): 111-118 are written as in their first delivery.
    delta = written(sp.acknowledge("c3", [AckBatch(119, 119, ACCEPT)], now_ms=7_000))
    assert (sp.spso, sp.speo) == (110, 120)
    assert inflight(sp) == [
        (110, 110, AV, 1, None),
        (111, 112, ACQ, 1, "c1"),
        (113, 118, ACQ, 1, "c2"),
        (119, 119, ACK, 1, None),
    ]
    assert delta == StateDelta(-1, (pb(111, 118, AV, 0), pb(119, 119, ACK, 1)))

    # Fetch records 110, 120 (consumer 1).
    log = [BatchHeader(110, 119), BatchHeader(120, 120)]
    assert sp.next_fetch_offset() == 110
    got = sp.acquire("c1", log, 10_000, 500)
    assert got == [AcquiredRange(110, 110, 2), AcquiredRange(120, 120, 1)]
    assert (sp.spso, sp.speo) == (110, 121)
    assert inflight(sp) == [
        (110, 110, ACQ, 2, "c1"),
        (111, 112, ACQ, 1, "c1"),
        (113, 118, ACQ, 1, "c2"),
        (119, 119, ACK, 1, None),
        (120, 120, ACQ, 1, "c1"),
    ]

    # Lock timeout elapsed 111, 112 (acquired at t=1000; the others later).
    assert sp.next_lock_deadline() == 1_000 + LOCK_MS
    delta = written(sp.expire_locks(now_ms=1_000 + LOCK_MS))
    assert inflight(sp) == [
        (110, 110, ACQ, 2, "c1"),
        (111, 112, AV, 1, None),
        (113, 118, ACQ, 1, "c2"),
        (119, 119, ACK, 1, None),
        (120, 120, ACQ, 1, "c1"),
    ]
    assert delta == StateDelta(-1, (pb(111, 112, AV, 1),))

    # Acknowledge 113-118 (consumer 2).
    delta = written(sp.acknowledge("c2", [AckBatch(113, 118, ACCEPT)], now_ms=31_500))
    assert inflight(sp) == [
        (110, 110, ACQ, 2, "c1"),
        (111, 112, AV, 1, None),
        (113, 119, ACK, 1, None),
        (120, 120, ACQ, 1, "c1"),
    ]
    assert delta == StateDelta(-1, (pb(113, 118, ACK, 1),))

    # Fetch records 111, 112 (consumer 3).
    assert sp.next_fetch_offset() == 111
    got = sp.acquire("c3", log, 32_000, 500)
    assert got == [AcquiredRange(111, 112, 2)]
    assert inflight(sp) == [
        (110, 110, ACQ, 2, "c1"),
        (111, 112, ACQ, 2, "c3"),
        (113, 119, ACK, 1, None),
        (120, 120, ACQ, 1, "c1"),
    ]

    # Acknowledge 110 (consumer 1): SPSO=111.
    delta = written(sp.acknowledge("c1", [AckBatch(110, 110, ACCEPT)], now_ms=33_000))
    assert (sp.spso, sp.speo) == (111, 121)
    assert delta == StateDelta(111, ())

    # Acknowledge 111, 112 (consumer 3): SPSO=120.
    delta = written(sp.acknowledge("c3", [AckBatch(111, 112, ACCEPT)], now_ms=34_000))
    assert (sp.spso, sp.speo) == (120, 121)
    assert inflight(sp) == [(120, 120, ACQ, 1, "c1")]
    assert delta == StateDelta(120, ())

    # What the store accumulated is what the engine would persist now.
    assert store.start_offset == 120
    assert store.canonical() == sp.persisted_view().canonical() == []
    reloaded = SharePartition.from_persisted(store, limits)
    assert (reloaded.spso, reloaded.speo) == (120, 120)  # 120 will be read and delivered again
