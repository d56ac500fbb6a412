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
    runs: list[AckRun] = []
    previous_last: int | None = None
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset:
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"acknowledgement batch {b.first_offset}-{b.last_offset} is not a valid range",
            )
        if previous_last is not None and b.first_offset <= previous_last:
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"acknowledgement batch {b.first_offset}-{b.last_offset} does not ascend past "
                f"{previous_last}",
            )
        previous_last = b.last_offset
        types = b.acknowledge_types
        size = b.last_offset - b.first_offset + 1
        if len(types) not in (1, size):
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"acknowledgement batch {b.first_offset}-{b.last_offset} carries {len(types)} "
                f"types: one, or one per offset ({size}), expected",
            )
        if not _VALID_TYPES.issuperset(types):
            bad = sorted(set(types) - _VALID_TYPES)
            raise ShareError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type(s) {bad}")
        if len(types) == 1:
            _add_run(runs, b.first_offset, b.last_offset, types[0])
            continue
        offset = b.first_offset
        run_start = offset
        current = types[0]
        for t in types[1:]:
            offset += 1
            if t != current:
                _add_run(runs, run_start, offset - 1, current)
                run_start, current = offset, t
        _add_run(runs, run_start, b.last_offset, current)
    return runs


def _add_run(runs: list[AckRun], first: int, last: int, ack_type: int) -> None:
    if runs:
        prev = runs[-1]
        if prev.last_offset + 1 == first and prev.ack_type == ack_type:
            runs[-1] = AckRun(prev.first_offset, last, prev.ack_type)
            return
    runs.append(AckRun(first, last, AcknowledgeType(ack_type)))
