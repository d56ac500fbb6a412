"""Redelivery back-off (beyond KIP-932): a record whose lock ended without acceptance is held
back for a time that grows with its delivery count, and the store keeps when it ends."""

from __future__ import annotations

from shareproxy.core import group_config as gc
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.backoff import RedeliveryBackoff
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.inflight import AcquiredRange
from shareproxy.core.persisted import PersistedBatch, PersistedState, batches_from_rows
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import AcknowledgeType, ArchiveReason
from tests.support.kip_tables import ACQ, AV, inflight

RELEASE = (int(AcknowledgeType.RELEASE),)
LOG = [BatchHeader(0, 9)]
BACKOFF = RedeliveryBackoff(initial_ms=1_000, multiplier=2.0, max_ms=3_000)


def backed_off(**limits) -> SharePartition:
    return SharePartition(0, PartitionLimits(redelivery_backoff=BACKOFF, **limits))


def test_the_delay_grows_with_the_delivery_count_up_to_its_maximum():
    assert [BACKOFF.delay_ms(n) for n in range(1, 6)] == [1_000, 2_000, 3_000, 3_000, 3_000]
    assert RedeliveryBackoff().delay_ms(3) == 0  # off by default, as Kafka redelivers at once
    assert RedeliveryBackoff(500, 1.5, 10_000).delay_ms(3) == 1_125
    assert RedeliveryBackoff(500, 10.0, 3_600_000).delay_ms(1_000) == 3_600_000  # no overflow


def test_a_released_record_is_not_acquired_again_before_its_back_off_ends():
    sp = backed_off(delivery_count_limit=10)  # no poison throttling on these deliveries
    assert sp.acquire("m", LOG, 0, 10) == [AcquiredRange(0, 9, 1)]
    sp.acknowledge("m", [AckBatch(0, 9, RELEASE)], 100)  # delivery 1 ended: 1 s
    assert sp.acquire("n", LOG, 1_099, 10) == []
    assert sp.acquire("n", LOG, 1_100, 10) == [AcquiredRange(0, 9, 2)]
    sp.acknowledge("n", [AckBatch(0, 9, RELEASE)], 1_200)  # delivery 2 ended: 2 s
    assert sp.acquire("m", LOG, 3_199, 10) == []
    assert sp.acquire("m", LOG, 3_200, 10) == [AcquiredRange(0, 9, 3)]
    deadline = sp.next_lock_deadline()
    sp.expire_locks(deadline)  # a lock timeout backs off too: 3 s after delivery 3 (the most)
    assert inflight(sp) == [(0, 9, AV, 3, None)]
    assert sp.ranges[0].available_at_ms == deadline + 3_000


def test_only_the_records_backed_off_are_held_back():
    sp = backed_off()
    log = [BatchHeader(0, 9), BatchHeader(10, 19)]
    sp.acquire("m", log, 0, 10)  # 0-9
    sp.acknowledge("m", [AckBatch(0, 4, RELEASE)], 0)  # 0-4 wait until 1000
    assert sp.acquire("n", log, 10, 10) == [AcquiredRange(10, 19, 1)]
    assert inflight(sp) == [(0, 4, AV, 1, None), (5, 9, ACQ, 1, "m"), (10, 19, ACQ, 1, "n")]
    assert sp.backoff_ended(0, 999) is False
    assert sp.backoff_ended(999, 1_000) is True  # the runtime wakes waiting fetches then


def test_the_last_delivery_is_archived_without_waiting():
    sp = backed_off(delivery_count_limit=2)
    one = [BatchHeader(0, 0)]
    sp.acquire("m", one, 0, 10)
    sp.release_member("m", 0)
    assert sp.acquire("m", one, 1_000, 10) == [AcquiredRange(0, 0, 2)]
    sp.release_member("m", 1_000)
    assert inflight(sp) == [] and sp.spso == 1  # Archived at once: SPSO moved past it
    assert sp.archived_log == [(0, 0, 2, ArchiveReason.DELIVERY_LIMIT)]


def test_the_back_off_is_stored_and_survives_a_restart():
    sp = backed_off()
    sp.acquire("m", LOG, 0, 10)
    delta = sp.acknowledge("m", [AckBatch(0, 9, RELEASE)], 500)
    assert delta.state_batches == (PersistedBatch(0, 9, AV, 1, 1_500),)
    assert delta.state_batches[0].to_row() == [0, 9, 0, 1, 1_500]
    store = PersistedState()
    store.apply(delta)
    stored = PersistedState(0, batches_from_rows(b.to_row() for b in store.batches))
    again = SharePartition.from_persisted(stored, PartitionLimits(redelivery_backoff=BACKOFF))
    assert again.acquire("n", LOG, 1_499, 10) == []
    assert again.acquire("n", LOG, 1_500, 10) == [AcquiredRange(0, 9, 2)]
    # while acquired, the store still holds the back-off it had: the two agree
    assert again.persisted_view().batches == [PersistedBatch(0, 9, AV, 1, 1_500)]


def test_rows_without_a_back_off_keep_kip_932s_four_values():
    assert PersistedBatch(0, 9, AV, 1).to_row() == [0, 9, 0, 1]
    assert batches_from_rows([[0, 9, 0, 1], [10, 19, 0, 2, 77]]) == [
        PersistedBatch(0, 9, AV, 1, 0),
        PersistedBatch(10, 19, AV, 2, 77),
    ]


def test_turning_the_back_off_off_frees_records_waiting_on_it():
    sp = backed_off()
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(0, 9, RELEASE)], 0)
    assert sp.acquire("n", LOG, 10, 10) == []
    sp.limits = GroupSettings().limits  # the group's back-off config removed: Kafka's default
    assert sp.acquire("n", LOG, 10, 10) == [AcquiredRange(0, 9, 2)]
    assert inflight(sp) == [(0, 9, ACQ, 2, "n")]


def test_group_configs_carry_the_back_off():
    settings = GroupSettings().with_configs(
        {gc.BACKOFF_INITIAL: "250", gc.BACKOFF_MULTIPLIER: "1.5", gc.BACKOFF_MAX: "4000"}
    )
    assert settings.limits.redelivery_backoff == RedeliveryBackoff(250, 1.5, 4_000)
    assert settings.as_configs()[gc.BACKOFF_MULTIPLIER] == "1.5"
    assert GroupSettings().with_configs(settings.as_configs()) == settings
