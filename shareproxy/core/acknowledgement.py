"""Acknowledgement batches as clients send them, checked and reduced to runs of one type.

A batch is {FirstOffset, LastOffset, AcknowledgeTypes} where the types are either one type for
the whole range or one per offset. Batches must ascend without overlapping. Adjacent runs of the
same type are merged, so a per-offset acknowledgement of 500 accepted records costs one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.states import AcknowledgeType

_VALID_TYPES = frozenset(int(t) for t in AcknowledgeType)


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AckRun:
    first_offset: int
    last_offset: int
    ack_type: AcknowledgeType


def normalize_acks(batches: Sequence[AckBatch]) -> list[AckRun]:
    """Validate the batches and return ascending runs; INVALID_REQUEST if malformed."""
    runs: list[list[int]] = []  # [first, last, type]; AckRun objects are built once at the end
    previous_last = -1
    valid = _VALID_TYPES
    for b in batches:
        first, last, types = b.first_offset, b.last_offset, b.acknowledge_types
        if first < 0 or last < first:
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"acknowledgement batch {first}-{last} is not a valid range",
            )
        if first <= previous_last:
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"acknowledgement batch {first}-{last} does not ascend past {previous_last}",
            )
        previous_last = last
        size = last - first + 1
        if len(types) not in (1, size):
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"acknowledgement batch {first}-{last} carries {len(types)} types: one, or one "
                f"per offset ({size}), expected",
            )
        if len(types) == 1 or types.count(types[0]) == size:
            t = types[0]
            if t not in valid:
                raise ShareError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {t}")
            _add_run(runs, first, last, t)
            continue
        if not valid.issuperset(types):
            bad = sorted(set(types) - valid)
            raise ShareError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type(s) {bad}")
        run_start, current = first, types[0]
        for offset, t in enumerate(types, first):
            if t != current:
                _add_run(runs, run_start, offset - 1, current)
                run_start, current = offset, t
        _add_run(runs, run_start, last, current)
    return [AckRun(f, la, AcknowledgeType(t)) for f, la, t in runs]


def _add_run(runs: list[list[int]], first: int, last: int, ack_type: int) -> None:
    if runs and runs[-1][1] + 1 == first and runs[-1][2] == ack_type:
        runs[-1][1] = last
    else:
        runs.append([first, last, ack_type])
