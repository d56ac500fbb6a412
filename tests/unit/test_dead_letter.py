"""Dead-letter topics (KIP-1191): with one configured, a record rejected or at its delivery
limit is Archiving (stored, SPSO waits for it) until its copy is in the topic, then Archived."""

from __future__ import annotations

import pytest

from shareproxy.core import dead_letter as dl
from shareproxy.core import group_config as gc
from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.dead_letter import DeadLetterCause, DeadLetterRun
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.persisted import PersistedBatch, PersistedState, StateDelta
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import TRANSITIONS, AcknowledgeType, ArchiveReason, RecordState
from tests.support.kip_tables import ACK, inflight

ARCHIVING = RecordState.ARCHIVING
ACCEPT, RELEASE, REJECT = ((int(t),) for t in (1, 2, 3))
LOG = [BatchHeader(0, 9)]


def with_dead_letters(**limits) -> SharePartition:
    return SharePartition(0, PartitionLimits(dead_letter=True, **limits))


def test_a_rejected_record_is_archiving_until_the_dead_letter_topic_has_it():
    sp = with_dead_letters()
    sp.acquire("m", LOG, 0, 10)
    delta = sp.acknowledge("m", [AckBatch(0, 1, REJECT), AckBatch(2, 9, ACCEPT)], 1)
    assert inflight(sp) == [(0, 1, ARCHIVING, 1, None), (2, 9, ACK, 1, None)]
    assert sp.spso == 0  # SPSO waits: the records are not settled until they are written
    assert delta == StateDelta(
        -1, (PersistedBatch(0, 1, ARCHIVING, 1), PersistedBatch(2, 9, ACK, 1))
    )
    assert sp.dead_letters() == [DeadLetterRun(0, 1, 1, DeadLetterCause.REJECTED)]
    assert sp.archived_log == [
        (0, 1, 1, ArchiveReason.REJECTED)
    ]  # the poison report lists it at once
    assert sp.dead_lettered(0, 1) == StateDelta(10, ())  # SPSO moves past them all
    assert sp.spso == 10 and inflight(sp) == []
    assert sp.dead_letters() == [] and not sp.dead_letter_pending


def test_a_record_at_the_delivery_limit_goes_to_the_dead_letter_topic_too():
    sp = with_dead_letters(delivery_count_limit=2)
    one = [BatchHeader(0, 0)]
    sp.acquire("m", one, 0, 1)
    sp.acknowledge("m", [AckBatch(0, 0, RELEASE)], 1)
    sp.acquire("m", one, 2, 1)
    sp.expire_locks(sp.next_lock_deadline())  # the lock of the last delivery timed out
    assert inflight(sp) == [(0, 0, ARCHIVING, 2, None)]
    assert sp.dead_letters() == [DeadLetterRun(0, 0, 2, DeadLetterCause.DELIVERY_LIMIT)]
    assert sp.archived_at_limit == 1


def test_without_a_dead_letter_topic_records_are_archived_at_once_as_in_kip_932():
    sp = SharePartition(0, PartitionLimits())
    sp.acquire("m", LOG, 0, 10)
    sp.acknowledge("m", [AckBatch(0, 9, REJECT)], 1)
    assert sp.spso == 10 and not sp.dead_letter_pending and sp.dead_letters() == []


def test_archiving_survives_a_restart():
    sp = with_dead_letters()
    sp.acquire("m", LOG, 0, 10)
    store = PersistedState(0, [])
    store.apply(sp.acknowledge("m", [AckBatch(0, 4, REJECT)], 1))
    again = SharePartition.from_persisted(
        PersistedState(store.start_offset, list(store.batches)), PartitionLimits(dead_letter=True)
    )
    assert again.dead_letter_pending
    assert again.dead_letters() == [DeadLetterRun(0, 4, 1, DeadLetterCause.REJECTED)]
    again.dead_lettered(0, 9)  # 5-9 were first deliveries, not stored: read again from the log
    assert inflight(again) == [] and again.spso == again.speo == 5


def test_archiving_is_a_kip_1191_state_between_acquired_and_archived():
    assert RecordState.ARCHIVING in TRANSITIONS[RecordState.ACQUIRED]
    assert TRANSITIONS[RecordState.ARCHIVING] == frozenset({RecordState.ARCHIVED})
    assert not RecordState.ARCHIVING.is_terminal
    assert int(RecordState.ARCHIVING) == 3  # as Kafka stores it
    assert int(AcknowledgeType.REJECT) == REJECT[0]


def test_dead_letter_records_carry_kafkas_headers_and_keep_a_partitions_order():
    run = DeadLetterRun(7, 7, 3, DeadLetterCause.DELIVERY_LIMIT)
    assert dict(dl.headers("orders", 4, 7, "g1", run)) == {
        "__dlq.errors.topic": b"orders",
        "__dlq.errors.partition": b"4",
        "__dlq.errors.offset": b"7",
        "__dlq.errors.group": b"g1",
        "__dlq.errors.delivery.count": b"3",
        "__dlq.errors.message": b"Offset delivery count exceeded the threshold.",
    }
    assert [dl.target_partition(p, 3) for p in range(6)] == [0, 1, 2, 0, 1, 2]
    assert dl.cause_of(1, 5) == DeadLetterCause.REJECTED


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("dlq.orders", None),
        ("", None),
        ("__consumer_offsets", "must not start with '__'"),
        ("a b", "not a legal topic name"),
        ("x" * 250, "not a legal topic name"),
        ("..", "not a legal topic name"),
    ],
)
def test_which_topics_may_be_a_dead_letter_topic(name, problem):
    found = dl.topic_problem(name)
    assert (found is None) if problem is None else (problem in found)
    if problem is not None:
        with pytest.raises(gc.GroupConfigError, match=r"errors\.deadletterqueue\.topic\.name"):
            gc.check(gc.DLQ_TOPIC, name)


def test_the_group_configs_turn_dead_letters_on():
    settings = GroupSettings().with_configs({gc.DLQ_TOPIC: "dlq.orders", gc.DLQ_COPY: "true"})
    assert settings.limits.dead_letter and settings.dead_letter_copy
    assert settings.as_configs()[gc.DLQ_TOPIC] == "dlq.orders"
    assert not GroupSettings().limits.dead_letter
    assert GroupSettings().as_configs()[gc.DLQ_TOPIC] == ""
