"""Random operation sequences against a per-offset reference model (hypothesis).

The model keeps one entry per offset (state, delivery count, owner, deadline) and applies
KIP-932's rules record by record; the engine works on ranges. After every step they must agree,
the store (every delta folded in) must hold exactly what the engine says it should, and:
no record is lost, none is acknowledged twice, an Acknowledged or Archived record is never
handed out again, delivery counts never go down, SPSO never passes a non-terminal record, every
state change is one of KIP-932's transitions (``TRANSITIONS``), and a restart from the store
rebuilds the state the store describes. With a redelivery back-off drawn, a record whose lock
ended is handed out again exactly when its back-off is over, not before, restart or not.
With keys drawn (key-ordered delivery), a keyed record is handed out only to the member owning
its key and only when no earlier record of its key is Acquired or Available, and a record left
Available by an acquisition that took nothing is one its key holds back.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from shareproxy.core.acknowledgement import AckBatch
from shareproxy.core.acquisition import BatchHeader, PartitionLimits
from shareproxy.core.backoff import RedeliveryBackoff
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.key_order import HASH_SPACE, NO_KEY, WHOLE_SPACE, owned_range
from shareproxy.core.persisted import PersistedState, StateDelta
from shareproxy.core.share_partition import SharePartition
from shareproxy.core.states import TRANSITIONS, AcknowledgeType, AcquireMode, RecordState

AV, ACQ, ACK, ARCHIVING, ARC = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVING,
    RecordState.ARCHIVED,
)
LOG_END = 59  # the log holds offsets 0..59
MEMBERS = ("m0", "m1", "m2")
LOCK_MS = 100
LIMIT = 3
MAX_LOCKS = 25


@dataclass
class Rec:
    state: RecordState = AV
    dc: int = 0
    member: str | None = None
    deadline: int | None = None
    available_at: int = 0  # under a redelivery back-off: not handed out before


class ShareLeaderMachine(RuleBasedStateMachine):
    @initialize(
        cuts=st.sets(st.integers(1, LOG_END), max_size=12),
        backoff=st.sampled_from([(0, 2, 0), (40, 2, 100), (30, 3, 1000), (60, 1, 60)]),
        dead_letter=st.booleans(),
        keys=st.none() | st.lists(st.integers(-1, 3), min_size=LOG_END + 1, max_size=LOG_END + 1),
    )
    def setup(self, cuts, backoff, dead_letter, keys):
        edges = [0, *sorted(cuts), LOG_END + 1]
        # four keys spread over the hash space (so members own different ones), or none
        self.keys = [NO_KEY if k < 0 else k * HASH_SPACE // 4 + 1 for k in keys or []]
        self.log = [
            BatchHeader(a, b - 1, key_hashes=tuple(self.keys[a:b]) if keys else None)
            for a, b in itertools.pairwise(edges)
        ]
        self.backoff = backoff  # initial, multiplier, max: the model's own arithmetic
        self.limits = PartitionLimits(
            LOCK_MS,
            LIMIT,
            MAX_LOCKS,
            RedeliveryBackoff(backoff[0], float(backoff[1]), backoff[2]),
            dead_letter,
            key_ordered=keys is not None,
        )
        self.given_up = ARCHIVING if dead_letter else ARC  # KIP-1191: via the dead-letter topic
        self.sp, init = SharePartition.initialized(0, self.limits)
        self.store = PersistedState()
        self.store.apply(init)
        self.model: dict[int, Rec] = {}
        self.log_start = 0
        self.now = 0
        self.handed_out: dict[int, int] = {}  # offset -> last delivery count handed out
        self.acked: set[int] = set()
        self.engine_states: dict[int, RecordState] = {}  # per offset, after the last step

    # ------------------------------------------------------------- helpers
    def rec(self, offset: int) -> Rec:
        return self.model.setdefault(offset, Rec())

    def write(self, delta: StateDelta) -> None:
        self.store.apply(delta)

    def end_lock(self, offset: int, r: Rec) -> None:
        if offset < self.log_start:
            r.state = ARC
        elif r.dc >= LIMIT:
            r.state = self.given_up
        else:
            r.state = AV
            initial, multiplier, most = self.backoff
            delay = min(initial * multiplier ** (r.dc - 1), most) if initial else 0
            r.available_at = self.now + delay if delay else 0
        r.member = r.deadline = None

    def key_held(self, offset: int) -> bool:
        """Whether an earlier record of ``offset``'s key is still to process."""
        key = self.keys[offset]
        return key != NO_KEY and any(
            self.keys[o] == key and self.rec(o).state in (AV, ACQ)
            for o in range(self.sp.spso, offset)
        )

    # ------------------------------------------------------------- operations
    @rule(
        member=st.sampled_from(MEMBERS),
        max_records=st.integers(1, 30),
        mode=st.sampled_from(list(AcquireMode)),
        sharers=st.integers(1, 3),
        split_keys=st.booleans(),
    )
    def acquire(self, member, max_records, mode, sharers, split_keys):
        start = self.sp.next_fetch_offset()
        batches = [b for b in self.log if b.last_offset >= start]
        owned = owned_range(member, MEMBERS) if split_keys else WHOLE_SPACE
        got = self.sp.acquire(member, batches, self.now, max_records, mode, sharers, owned)
        n = 0
        for g in got:
            for o in range(g.first_offset, g.last_offset + 1):
                r = self.rec(o)
                assert r.state == AV, f"{o} handed out while {r.state.name}"
                assert r.available_at <= self.now, f"{o} handed out during its back-off"
                assert o not in self.acked
                assert o >= self.log_start
                assert g.delivery_count == r.dc + 1
                assert g.delivery_count >= self.handed_out.get(o, 0), "delivery count went down"
                if self.keys and self.keys[o] != NO_KEY:
                    assert owned[0] <= self.keys[o] < owned[1], f"{o}: a key {member} does not own"
                    assert not self.key_held(o), f"{o} handed out while its key is held"
                self.handed_out[o] = g.delivery_count
                r.state, r.dc, r.member, r.deadline = ACQ, r.dc + 1, member, self.now + LOCK_MS
                n += 1
        if mode == AcquireMode.RECORD_LIMIT or sharers > 1:  # exact, or shared fairly
            assert n <= max_records
        if not got:  # liveness: nothing acquirable was left behind
            for o in range(self.sp.spso, min(self.sp.speo, LOG_END + 1)):
                r = self.rec(o)
                held = self.keys and (self.key_held(o) or not owned[0] <= self.keys[o] < owned[1])
                assert r.state != AV or r.available_at > self.now or held, f"{o} left Available"
            assert self.sp.speo > LOG_END or self.sp.in_flight_count >= MAX_LOCKS

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member, data):
        held = sorted(o for o, r in self.model.items() if r.state == ACQ and r.member == member)
        if held and data.draw(st.booleans(), "valid"):
            chosen = sorted(data.draw(st.sets(st.sampled_from(held), min_size=1), "offsets"))
        else:
            a = data.draw(st.integers(0, LOG_END), "first")
            chosen = list(range(a, data.draw(st.integers(a, min(a + 5, LOG_END)), "last") + 1))
        types = [data.draw(st.sampled_from(list(AcknowledgeType)), "type") for _ in chosen]
        batches, run = [], [chosen[0]]
        for o in chosen[1:]:
            if o == run[-1] + 1:
                run.append(o)
            else:
                batches.append(run)
                run = [o]
        batches.append(run)
        acks, i = [], 0
        for b in batches:
            t = tuple(int(x) for x in types[i : i + len(b)])
            acks.append(AckBatch(b[0], b[-1], t if len(set(t)) > 1 else t[:1]))
            i += len(b)
        spso, speo = self.sp.spso, self.sp.speo
        expected = ErrorCode.NONE  # Kafka's rules, batch by batch: below SPSO is skipped
        for b in acks:
            if b.last_offset < spso:
                continue
            if spso == speo:
                expected = ErrorCode.INVALID_RECORD_STATE
            elif b.last_offset >= speo:
                expected = ErrorCode.INVALID_REQUEST
            elif not all(
                self.rec(o).state == ACQ and self.rec(o).member == member
                for o in range(max(b.first_offset, spso), b.last_offset + 1)
            ):
                expected = ErrorCode.INVALID_RECORD_STATE
            if expected != ErrorCode.NONE:
                break
        try:
            delta = self.sp.acknowledge(member, acks, self.now)
        except ShareError as e:
            assert e.code == expected, f"{e.code.name} where {expected.name} expected: {e}"
            return
        assert expected == ErrorCode.NONE, f"accepted where {expected.name} expected"
        self.write(delta)
        for o, t in zip(chosen, types, strict=True):
            if o < spso:
                continue
            r = self.rec(o)
            if t == AcknowledgeType.ACCEPT:
                assert o not in self.acked
                self.acked.add(o)
                r.state, r.member, r.deadline = ACK, None, None
            elif t == AcknowledgeType.GAP:
                r.state, r.member, r.deadline = ARC, None, None
            elif t == AcknowledgeType.REJECT:
                r.state, r.member, r.deadline = self.given_up, None, None
            elif t == AcknowledgeType.RELEASE:
                self.end_lock(o, r)
            else:
                r.deadline = self.now + LOCK_MS

    @rule(dt=st.integers(1, 150))
    def time_passes_and_locks_expire(self, dt):
        self.now += dt
        self.write(self.sp.expire_locks(self.now))
        for o, r in self.model.items():
            if r.state == ACQ and r.deadline <= self.now:
                self.end_lock(o, r)

    @rule(member=st.sampled_from(MEMBERS))
    def session_closes(self, member):
        self.write(self.sp.release_member(member, self.now))
        for o, r in self.model.items():
            if r.state == ACQ and r.member == member:
                self.end_lock(o, r)

    @rule(data=st.data())
    def dead_letters_written(self, data):
        """The dead-letter writer got some Archiving runs into the topic (in any order)."""
        runs = self.sp.dead_letters()
        for o, r in self.model.items():
            inside = any(run.first <= o <= run.last for run in runs)
            assert (r.state == ARCHIVING) == inside, o
        for run in data.draw(st.permutations(runs), "order")[: data.draw(st.integers(0, 3))]:
            assert {self.rec(o).dc for o in range(run.first, run.last + 1)} == {run.delivery_count}
            self.write(self.sp.dead_lettered(run.first, run.last))
            for o in range(run.first, run.last + 1):
                self.rec(o).state = ARC

    @precondition(lambda self: self.log_start < LOG_END)
    @rule(step=st.integers(1, 8))
    def retention_moves_log_start(self, step):
        self.log_start = min(self.log_start + step, LOG_END)
        self.write(self.sp.update_log_start_offset(self.log_start))
        for o in range(self.log_start):
            r = self.rec(o)
            if r.state == AV:
                r.state = ARC

    @rule()
    def restart(self):
        """A crash: only what the store holds survives; acquired records come back."""
        before = self.sp.persisted_view().canonical()
        self.sp = SharePartition.from_persisted(
            PersistedState(self.store.start_offset, list(self.store.batches)), self.limits
        )
        assert self.sp.persisted_view().canonical() == before
        for r in self.model.values():
            if r.state == ACQ:
                r.state, r.dc, r.member, r.deadline = AV, r.dc - 1, None, None
        # the new leader learns the log start from the log, as after any load
        self.write(self.sp.update_log_start_offset(self.log_start))
        for o in range(self.log_start):
            if self.rec(o).state == AV:
                self.rec(o).state = ARC

    # ------------------------------------------------------------- invariants
    @invariant()
    def engine_agrees_with_the_model(self):
        sp = self.sp
        for o in range(sp.spso):
            assert self.rec(o).state in (ACK, ARC), f"SPSO {sp.spso} passed {o}"
        seen = sp.spso
        for r in sp.ranges:
            assert r.first == seen, "in-flight ranges must be contiguous"
            seen = r.last + 1
            for o in range(r.first, r.last + 1):
                m = self.rec(o)
                assert (m.state, m.dc, m.member) == (r.state, r.delivery_count, r.member_id), o
                if r.state == ACQ:
                    assert m.deadline == r.deadline_ms
                if r.state == AV:
                    assert m.available_at == r.available_at_ms, o
        assert seen == sp.speo
        for o in range(sp.speo, LOG_END + 1):  # not yet read: nothing happened to them
            m = self.rec(o)
            assert m.state in (AV, ARC) and m.member is None

    @invariant()
    def every_change_is_a_transition_of_the_kips_state_diagram(self):
        now = {o: r.state for r in self.sp.ranges for o in range(r.first, r.last + 1)}
        for o, state in now.items():
            before = self.engine_states.get(o, AV)
            assert state == before or state in TRANSITIONS[before], (
                f"{o}: {before.name} -> {state.name} is not in TRANSITIONS"
            )
        self.engine_states.update(now)

    @invariant()
    def the_store_holds_what_the_engine_says(self):
        assert self.store.start_offset == self.sp.spso
        assert self.store.canonical() == self.sp.persisted_view().canonical()


ShareLeaderMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SHAREPROXY_PROPERTY_EXAMPLES", "150")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestShareLeader = ShareLeaderMachine.TestCase
