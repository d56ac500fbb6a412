"""The oldest record not yet acknowledged, and a group's backlog summed over its
share-partitions: pure rules behind `groups list` and the age gauge."""

from shareproxy.core.lag import Backlog, backlog, first_unacked, oldest_unacked_age
from shareproxy.core.states import RecordState

ACQ, AVL, ACK, ARC = (
    RecordState.ACQUIRED,
    RecordState.AVAILABLE,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
)


def test_first_unacked_is_spso_when_the_first_range_waits() -> None:
    assert first_unacked(10, [(10, 14, ACQ), (15, 19, ACK)]) == 10
    assert first_unacked(10, [(10, 14, AVL)]) == 10


def test_first_unacked_skips_settled_ranges_and_stops_at_a_waiting_one() -> None:
    assert first_unacked(10, [(10, 12, ACK), (13, 15, ARC), (16, 20, ACQ)]) == 16


def test_first_unacked_past_everything_in_flight_is_the_first_record_not_read() -> None:
    assert first_unacked(10, [(10, 12, ACK), (13, 15, ARC)]) == 16
    assert first_unacked(7, []) == 7


def test_a_gap_between_settled_ranges_counts_as_waiting() -> None:
    assert first_unacked(10, [(10, 12, ACK), (15, 16, ACK)]) == 13


def test_archiving_records_still_wait_for_the_dead_letter_topic() -> None:
    assert first_unacked(0, [(0, 3, ACK), (4, 4, RecordState.ARCHIVING)]) == 4


def test_age_from_the_batch_timestamp() -> None:
    assert oldest_unacked_age(5, 10, 1_000, 4_500) == 3.5


def test_nothing_waits_at_or_past_the_high_watermark_so_the_age_is_zero() -> None:
    assert oldest_unacked_age(10, 10, None, 4_500) == 0.0
    assert oldest_unacked_age(12, 10, 1_000, 4_500) == 0.0


def test_unknown_high_watermark_or_timestamp_leaves_the_age_unknown() -> None:
    assert oldest_unacked_age(5, None, 1_000, 4_500) is None
    assert oldest_unacked_age(5, 10, None, 4_500) is None


def test_a_timestamp_ahead_of_the_clock_is_no_negative_age() -> None:
    assert oldest_unacked_age(5, 10, 9_000, 4_500) == 0.0


def test_backlog_sums_lag_and_takes_the_oldest_age() -> None:
    assert backlog([(3, 1.5), (0, 0.0), (7, 9.25)]) == Backlog(10, 9.25)


def test_one_unknown_partition_makes_the_group_unknown() -> None:
    assert backlog([(3, 1.5), (None, None)]) == Backlog(None, None)
    assert backlog([(3, None), (2, 4.0)]) == Backlog(5, None)


def test_no_share_partitions_means_nothing_waits() -> None:
    assert backlog([]) == Backlog(0, 0.0)
