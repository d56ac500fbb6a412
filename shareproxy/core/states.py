"""Record states, acknowledgement types and acquire modes, with KIP-932's transitions as data.

The numeric values are the wire/persisted ones: DeliveryState in ShareSnapshot uses
0 Available, 2 Acknowledged, 4 Archived (Acquired, 1, is never persisted), and KIP-1191 adds
3 Archiving: on its way to the group's dead-letter topic, Archived once written there.
"""

from enum import IntEnum, StrEnum


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4

    @property
    def is_terminal(self) -> bool:
        """Acknowledged and Archived records are never delivered again."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class ArchiveReason(StrEnum):
    """Why a delivered record was given up on, as the archive log keeps it: a member rejected
    it, or a lock ended (release or timeout) at the delivery count limit, as Kafka's
    SharePartition tells the two apart (its CLIENT_REJECT and DELIVERY_COUNT_EXCEEDED
    dead-letter causes); or an operator rejected it through the admin API."""

    REJECTED = "rejected"
    DELIVERY_LIMIT = "delivery-limit"
    OPERATOR = "operator-rejected"


class AcknowledgeType(IntEnum):
    """AcknowledgeTypes as sent in ShareFetch/ShareAcknowledge; Renew arrived with KIP-1222."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class AcquireMode(IntEnum):
    """ShareFetch v2 ShareAcquireMode: whole batches (MaxRecords soft) or exactly MaxRecords."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


# Where an acknowledgement moves an Acquired record. Release is the one that depends on the
# delivery count (Available below the limit, Archived at it) and Renew keeps the record Acquired.
ACK_TARGET: dict[AcknowledgeType, RecordState] = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.RENEW: RecordState.ACQUIRED,
}

# Legal transitions (KIP-932's state diagram, with KIP-1191's Archiving). Terminal states have
# none. Beyond KIP-932, an operator may skip (accept) or reject an Available record no one holds
# (core/record_actions.py).
TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset(
        {
            RecordState.ACQUIRED,
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVING,
            RecordState.ARCHIVED,
        }
    ),
    RecordState.ACQUIRED: frozenset(
        {
            RecordState.AVAILABLE,
            RecordState.ACQUIRED,
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVING,
            RecordState.ARCHIVED,
        }
    ),
    RecordState.ACKNOWLEDGED: frozenset(),
    RecordState.ARCHIVING: frozenset({RecordState.ARCHIVED}),
    RecordState.ARCHIVED: frozenset(),
}


def released_state(
    delivery_count: int, delivery_count_limit: int, dead_letter: bool = False
) -> RecordState:
    """State of a record whose lock ends without acceptance (release or lock timeout); with a
    dead-letter topic, a record at the limit goes there first."""
    if delivery_count >= delivery_count_limit:
        return archived_state(dead_letter)
    return RecordState.AVAILABLE


def archived_state(dead_letter: bool) -> RecordState:
    """Where a record given up on goes: Archiving while a dead-letter topic must get it."""
    return RecordState.ARCHIVING if dead_letter else RecordState.ARCHIVED
