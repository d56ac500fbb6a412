"""The redrive rules: what a selection of an archive log comes to, offset by offset, however the
log's ranges overlap, and the headers of a redriven copy."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from shareproxy.core.redrive import (
    ArchivedEntry,
    Selection,
    claimed_pieces,
    merged,
    minus,
    plan,
    redrive_headers,
)
from shareproxy.core.store import SharePartitionKey

KEY = SharePartitionKey("g", uuid.UUID(int=7), 3)
WHEN = datetime(2026, 11, 26, tzinfo=UTC)


def entry(first: int, last: int, redriven: bool = False) -> ArchivedEntry:
    return ArchivedEntry(KEY, first, last, 5, "delivery-limit", WHEN, WHEN if redriven else None)


def test_intervals_merge_and_subtract():
    assert merged([(5, 9), (0, 2), (3, 3), (8, 12)]) == [(0, 3), (5, 12)]
    assert minus([(0, 20)], [(2, 4), (10, 30)]) == [(0, 1), (5, 9)]
    assert minus([(0, 3)], []) == [(0, 3)]


def test_a_selection_splits_into_to_redrive_already_redriven_and_missing():
    log = [entry(0, 4), entry(5, 6, redriven=True), entry(10, 12)]
    p = plan(Selection(KEY, 3, 11), log)
    assert (p.redrive, p.already, p.missing) == ([(3, 4), (10, 11)], [(5, 6)], [(7, 9)])
    assert p.records == 4 and not p.empty


def test_overlapping_ranges_count_each_offset_once_and_redriven_wins():
    log = [entry(0, 9), entry(0, 4, redriven=True)]  # a range logged again, longer
    p = plan(Selection(KEY), log)
    assert (p.redrive, p.already, p.missing) == ([(5, 9)], [(0, 4)], [])


def test_all_of_a_partition_with_nothing_archived_is_empty():
    p = plan(Selection(KEY), [])
    assert p.empty and p.missing == [] and p.records == 0


def test_a_claim_cuts_its_range_into_pieces():
    assert claimed_pieces(entry(5, 9), (6, 7)) == [((5, 5), False), ((6, 7), True), ((8, 9), False)]
    assert claimed_pieces(entry(5, 9), (5, 9)) == [((5, 9), True)]


def test_a_copy_names_its_origin():
    assert redrive_headers("orders", 3, 42, "g", 1_764_000_000_000) == [
        ("__redrive.topic", b"orders"),
        ("__redrive.partition", b"3"),
        ("__redrive.offset", b"42"),
        ("__redrive.group", b"g"),
        ("__redrive.timestamp", b"1764000000000"),
    ]
