"""Kafka's ``simple`` share-group assignor, as its group coordinator computes it today.

Its rules (Kafka's ``SimpleAssignor``): every partition is shared by the same number of members,
``ceil(members / partitions)``, so with more members than partitions every partition gets that
many and the spare slots go to some members as a second partition; each member's number of
partitions is within one of every other's; a member keeps what it had where that holds.
When every member subscribes to the same topics, their partitions form one pool; otherwise each
topic is assigned on its own among the members subscribed to it.

It differs from the proxy's own ``sticky-balanced`` assignor (``core.assignor``) when members
outnumber partitions: there every member has exactly one partition and the numbers of members
per partition differ by at most one, here every partition has the same number of members and
some members have two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

Assignment = dict[UUID, tuple[int, ...]]
Slot = tuple[UUID, int]

NAME = "simple"


def assign(
    subscriptions: Mapping[str, Sequence[str]],
    topics: Mapping[str, tuple[UUID, int]],
    previous: Mapping[str, Assignment] | None = None,
) -> dict[str, Assignment]:
    """Member id → {topic id: partitions}; the arguments as ``core.assignor.assign`` takes
    them. Deterministic for the same inputs."""
    previous = previous or {}
    held: dict[str, list[Slot]] = {}
    for m in subscriptions:
        held[m] = [(t, p) for t, ps in sorted(previous.get(m, {}).items()) for p in sorted(ps)]
    chosen: dict[str, list[Slot]] = {m: [] for m in subscriptions}
    subscribed = {m: frozenset(n for n in subs if n in topics) for m, subs in subscriptions.items()}
    if len(set(subscribed.values())) <= 1:
        pools = [(sorted(subscriptions), sorted({n for s in subscribed.values() for n in s}))]
    else:
        pools = [
            (sorted(m for m, s in subscribed.items() if name in s), [name])
            for name in sorted(topics)
        ]
    for members, names in pools:
        slots = [(topics[n][0], p) for n in names for p in range(topics[n][1])]
        if members and slots:
            for m, got in _fill(members, slots, held).items():
                chosen[m].extend(got)
    result: dict[str, Assignment] = {}
    for m, got in chosen.items():
        by_topic: dict[UUID, list[int]] = {}
        for t, p in got:
            by_topic.setdefault(t, []).append(p)
        result[m] = {t: tuple(sorted(ps)) for t, ps in by_topic.items()}
    return result


def _fill(
    members: list[str], slots: list[Slot], held: Mapping[str, Sequence[Slot]]
) -> dict[str, list[Slot]]:
    """Assign one pool: ``sharing`` members per partition, the ``sharing * len(slots)``
    assignments spread over the members within one of each other, kept where they were."""
    sharing = -(-len(members) // len(slots))
    total = sharing * len(slots)
    n = len(members)
    # member i's share of the total, so the counts differ by at most one
    desired = {m: -(-total * (i + 1) // n) - -(-total * i // n) for i, m in enumerate(members)}
    sharers: dict[Slot, list[str]] = {s: [] for s in slots}
    owned: dict[str, list[Slot]] = {m: [] for m in members}
    for m in members:
        for s in held.get(m, ()):
            if s in sharers and len(owned[m]) < desired[m] and len(sharers[s]) < sharing:
                sharers[s].append(m)
                owned[m].append(s)
    order = {m: i for i, m in enumerate(members)}
    unfilled = [m for m in members if len(owned[m]) < desired[m]]
    for s in slots:
        while len(sharers[s]) < sharing and unfilled:
            # the unfilled member with the fewest partitions that does not hold this one yet
            candidates = [m for m in unfilled if s not in owned[m]]
            if candidates:
                m = min(candidates, key=lambda c: (len(owned[c]), order[c]))
            else:  # a full member takes it, the short one gets one of that member's
                m = _swap_in(s, short := unfilled[0], members, owned, sharers)
                if len(owned[short]) >= desired[short]:
                    unfilled.remove(short)
            sharers[s].append(m)
            owned[m].append(s)
            if m in unfilled and len(owned[m]) >= desired[m]:
                unfilled.remove(m)
    return owned


def _swap_in(
    s: Slot,
    short: str,
    members: list[str],
    owned: dict[str, list[Slot]],
    sharers: dict[Slot, list[str]],
) -> str:
    """Every member still short of its count already holds ``s`` (kept from before): a full
    member that lacks ``s`` hands ``short`` one of its partitions, to take ``s`` instead.
    One exists: a full member's partitions cannot all be among the short one's, which are
    fewer and include ``s``."""
    for m in members:
        if m != short and s not in owned[m]:
            given = next((x for x in owned[m] if x not in owned[short]), None)
            if given is not None:
                owned[m].remove(given)
                sharers[given].remove(m)
                owned[short].append(given)
                sharers[given].append(short)
                return m
    raise AssertionError("no member to swap with")  # unreachable, as said above
