"""Small helpers so tests can state in-flight and persisted state the way the KIP's tables do."""

from shareproxy.core.persisted import PersistedBatch
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import RecordState

AV, ACQ, ACK, ARC = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
)


def inflight(sp: SharePartition) -> list[tuple]:
    """(first, last, state, delivery count, member) per range, adjacent equal ones merged."""
    out: list[tuple] = []
    for r in sp.ranges:
        row = (r.first, r.last, r.state, r.delivery_count, r.member_id)
        if out and out[-1][1] + 1 == r.first and out[-1][2:] == row[2:]:
            out[-1] = (out[-1][0], *row[1:])
        else:
            out.append(row)
    return out


def pb(first: int, last: int, state: RecordState, count: int) -> PersistedBatch:
    return PersistedBatch(first, last, state, count)
