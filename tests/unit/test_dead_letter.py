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
from shareproxy.settings.loader import load
from shareproxy.settings.model import Settings
from shareproxy.settings.problems import SettingsInvalid
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
        ("orders.dlq", "must start with 'dlq.' (errors.deadletterqueue.topic.name.prefix)"),
        ("dlq", "must start with 'dlq.'"),
    ],
)
def test_which_topics_may_be_a_dead_letter_topic(name, problem):
    found = dl.topic_problem(name, dl.DEFAULT_TOPIC_PREFIX)
    assert (found is None) if problem is None else (problem in found)
    if problem is not None:
        with pytest.raises(gc.GroupConfigError, match=r"errors\.deadletterqueue\.topic\.name"):
            gc.check(gc.DLQ_TOPIC, name, gc.KAFKA_BOUNDS)


def test_the_prefix_is_kafkas_default_and_the_nodes_to_change():
    """Kafka's errors.deadletterqueue.topic.name.prefix, "dlq." unless set; empty: any name.
    A group's change is refused (INVALID_CONFIG) naming the rule; the proxy-wide default
    topic is held to it when serve starts."""
    assert gc.KAFKA_BOUNDS.dead_letter_topic_prefix == dl.DEFAULT_TOPIC_PREFIX == "dlq."
    with pytest.raises(gc.GroupConfigError, match=r"must start with 'dlq\.'"):
        gc.validate({gc.DLQ_TOPIC: "orders-dead"}, {})
    anything = gc.GroupBounds(dead_letter_topic_prefix="")
    assert gc.validate({gc.DLQ_TOPIC: "orders-dead"}, {}, bounds=anything) == {
        gc.DLQ_TOPIC: "orders-dead"
    }
    own = gc.GroupBounds(dead_letter_topic_prefix="dead.")
    with pytest.raises(gc.GroupConfigError, match=r"must start with 'dead\.'"):
        gc.validate({gc.DLQ_TOPIC: "dlq.orders"}, {}, bounds=own)
    # a stored name another prefix allowed does not block changes to other configs
    assert gc.validate({gc.DELIVERY_COUNT_LIMIT: "3"}, {gc.DLQ_TOPIC: "dlq.orders"}, bounds=own)

    with pytest.raises(SettingsInvalid, match=r"--errors-deadletterqueue-topic-name-prefix x\.: "):
        load({"dead_letter_topic": "dlq.orders", "errors_deadletterqueue_topic_name_prefix": "x."})
    with pytest.raises(SettingsInvalid, match="--dead-letter-topic orders: "):
        load({"dead_letter_topic": "orders"})
    assert load({"dead_letter_topic": "orders", "errors_deadletterqueue_topic_name_prefix": ""})


@pytest.mark.parametrize(
    ("reported", "problem"),
    [
        ({dl.GROUP_ENABLE: "true"}, False),  # opted in, on Kafka 4.4 or Tansu
        ({dl.GROUP_ENABLE: "TRUE", "cleanup.policy": "delete"}, False),
        ({dl.GROUP_ENABLE: "false", "cleanup.policy": "delete"}, True),  # Kafka 4.4's default
        ({}, True),  # Tansu reports only what a topic sets: not set
        ({dl.GROUP_ENABLE: "false"}, True),
        ({"cleanup.policy": "delete"}, False),  # a Kafka before 4.4: cannot carry it
    ],
)
def test_an_existing_topic_takes_dead_letters_only_once_its_owner_opted_in(reported, problem):
    found = dl.enabled_problem(reported)
    assert (found is not None) == problem
    if found is not None:
        assert f"{dl.GROUP_ENABLE}=true" in found


def test_a_missing_topic_is_created_only_when_the_node_allows_it_as_kafka_does():
    assert dl.AUTO_CREATE == "errors.deadletterqueue.auto.create.topics.enable"
    assert dl.missing_problem(auto_create=True) is None
    assert dl.AUTO_CREATE in (dl.missing_problem(auto_create=False) or "")
    assert dl.CREATED_CONFIGS == {dl.GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"}
    assert Settings().errors_deadletterqueue_auto_create_topics_enable is False


def test_the_group_configs_turn_dead_letters_on():
    settings = GroupSettings().with_configs({gc.DLQ_TOPIC: "dlq.orders", gc.DLQ_COPY: "true"})
    assert settings.limits.dead_letter and settings.dead_letter_copy
    assert settings.as_configs()[gc.DLQ_TOPIC] == "dlq.orders"
    assert not GroupSettings().limits.dead_letter
    assert GroupSettings().as_configs()[gc.DLQ_TOPIC] == ""
