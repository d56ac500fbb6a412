"""Key-ordered share delivery (beyond KIP-932): records with the same key are
processed by at most one member at a time and in offset order.

The rule: a keyed record is acquirable only when it is the earliest record of its key still to
be processed (Acquired, or Available: released, timed out or never delivered). Keys are known
by a hash of their bytes (``key_hash``); records without a key are unordered. Members sharing a
partition own even ranges of the hash space (``owned_range``), so a key stays with one member
while the set of members is steady, and moves only once its records in flight are done. Pure.
"""

from __future__ import annotations

import hashlib
from bisect import insort
from collections.abc import Callable, Collection

NO_KEY = -1  # a record without a key (or an offset a batch does not hold): unordered
HASH_SPACE = 1 << 63  # key hashes are in [0, HASH_SPACE)
WHOLE_SPACE = (0, HASH_SPACE)
UNREADABLE_KEY = 0  # the records of a batch whose keys cannot be read: one key among themselves


def key_hash(key: bytes | None) -> int:
    """A key's place in the hash space; distinct keys colliding are only ordered together."""
    if key is None:
        return NO_KEY
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> 1


def owned_range(member_id: str, sharers: Collection[str]) -> tuple[int, int]:
    """The hash range [lo, hi) ``member_id`` owns among the members sharing a partition: the
    space split evenly, in member-id order (every node and every call agree on it)."""
    ordered = sorted(sharers)
    if member_id not in ordered or len(ordered) == 1:
        return WHOLE_SPACE
    i, n = ordered.index(member_id), len(ordered)
    return i * HASH_SPACE // n, (i + 1) * HASH_SPACE // n


class KeyOrder:
    """Per key hash, the offsets of its records known to be still to process, ascending.

    Offsets are learned when a record is first read (or, after a restart, re-read) and dropped
    lazily once they are done, so no transition of the state machine has to report here."""

    __slots__ = ("_key_of", "_offsets")

    def __init__(self) -> None:
        self._offsets: dict[int, list[int]] = {}
        self._key_of: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._key_of)

    def learn(self, offset: int, key: int) -> None:
        """``offset`` holds a record of ``key`` still to process (known already: no change)."""
        if key == NO_KEY or offset in self._key_of:
            return
        self._key_of[offset] = key
        offsets = self._offsets.get(key)
        if offsets is None:
            self._offsets[key] = [offset]
        elif offsets[-1] < offset:
            offsets.append(offset)
        else:
            insort(offsets, offset)

    def first_pending(self, key: int, pending: Callable[[int], bool]) -> int | None:
        """The earliest offset of ``key`` still to process, if any; ``pending(offset)`` says
        whether a learned offset still is (done ones are forgotten here)."""
        offsets = self._offsets.get(key)
        while offsets and not pending(offsets[0]):
            del self._key_of[offsets.pop(0)]
        if not offsets:
            self._offsets.pop(key, None)
            return None
        return offsets[0]

    def forget_below(self, offset: int) -> None:
        """Drop what is known of offsets below ``offset`` (SPSO moved past them)."""
        if not self._key_of or min(self._key_of) >= offset:
            return
        for key in {k for o, k in self._key_of.items() if o < offset}:
            kept = [o for o in self._offsets[key] if o >= offset]
            if kept:
                self._offsets[key] = kept
            else:
                del self._offsets[key]
        self._key_of = {o: k for o, k in self._key_of.items() if o >= offset}
