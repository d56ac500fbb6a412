"""A reset plan as CSV, in the form Kafka's tools export and read back (``--export``,
``--from-file``): one ``topic,partition,offset`` line per partition, no header. Kafka's
kafka-consumer-groups.sh writes ``group,topic,partition,offset`` when it resets several groups
at once and reads either form: the three-column one as the one group's plan, the four-column
one filtered to the group (``GroupOffsetsResetter.parseResetPlan``)."""

from __future__ import annotations

from collections.abc import Iterable

from shareproxy.core.errors import ErrorCode, ShareError

PlanOffsets = dict[tuple[str, int], int]  # (topic, partition) → new start offset


def export_csv(rows: Iterable[tuple[str, int, int]]) -> str:
    """``topic,partition,offset`` lines, each ended by a newline, as Kafka's CSV writer."""
    return "".join(f"{topic},{partition},{offset}\n" for topic, partition, offset in rows)


def parse_csv(text: str, group_id: str) -> PlanOffsets:
    """The group's plan in ``text``; INVALID_REQUEST naming the line that is not one, or
    saying that the file holds no plan for the group."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    with_group = bool(lines) and len(lines[0].split(",")) == 4
    plan: PlanOffsets = {}
    for number, line in enumerate(lines, start=1):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != (4 if with_group else 3):
            raise _bad(number, line)
        if with_group:
            group, *fields = fields
            if group != group_id:
                continue
        topic, partition, offset = fields
        if not topic or not _number(partition) or not _number(offset):
            raise _bad(number, line)
        plan[(topic, int(partition))] = int(offset)
    if not plan:
        raise ShareError(ErrorCode.INVALID_REQUEST, f"no reset plan for group {group_id!r} found")
    return plan


def _number(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes digits ``int`` refuses (superscripts)."""
    return text.isascii() and text.isdigit()


def _bad(number: int, line: str) -> ShareError:
    return ShareError(
        ErrorCode.INVALID_REQUEST,
        f"line {number} {line!r}: expected topic,partition,offset "
        "(or group,topic,partition,offset)",
    )
