"""The rules of a connection's authentication, on the state object alone: where each listener
starts, every move the table allows and nothing else, and what each phase lets a client do."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shareproxy.kafka.connection_state import (
    ANONYMOUS,
    TRANSITIONS,
    ConnectionState,
    IllegalTransition,
    Intent,
    Phase,
)
from shareproxy.security.sasl import SaslExchange

ALICE = "User:alice"
CERTIFICATE = {"subject": ((("organizationName", "acme"),), (("commonName", "carol"),))}
STARTS = {Phase.OPEN: ConnectionState, Phase.AWAITING_HANDSHAKE: lambda: ConnectionState(sasl=True)}


def _exchange() -> SaslExchange:
    return SaslExchange("PLAIN", lambda user, mechanism: None)


INTENTS: dict[Intent, Callable[[ConnectionState], None]] = {
    Intent.HANDSHAKE: lambda s: s.handshake(_exchange()),
    Intent.AUTHENTICATED_AS: lambda s: s.authenticated_as(ALICE),
    Intent.REFUSE: lambda s: s.refuse(),
}


def _paths() -> dict[Phase, list[tuple[Phase, list[Intent]]]]:
    """For each phase, every way to it from a start: (start, intents in order)."""
    found: dict[Phase, list[tuple[Phase, list[Intent]]]] = {p: [] for p in Phase}
    todo = [(start, start, []) for start in STARTS]
    while todo:
        start, phase, path = todo.pop()
        found[phase].append((start, path))
        assert len(path) <= len(Phase), "the table has a cycle"
        for intent, after in TRANSITIONS[phase].items():
            todo.append((start, after, [*path, intent]))
    return found


PATHS = _paths()


def _in(phase: Phase) -> ConnectionState:
    """A state brought to ``phase`` by its intents alone, from a start."""
    start, path = PATHS[phase][0]
    state = STARTS[start]()
    for intent in path:
        INTENTS[intent](state)
    assert state.phase is phase
    return state


def _facts(state: ConnectionState) -> tuple[object, ...]:
    return (state.phase, state.principal, state.authenticated, state.closing, state.exchange)


ALLOWED = [(p, i) for p, moves in TRANSITIONS.items() for i in moves]
REFUSED = [(p, i) for p in Phase for i in Intent if i not in TRANSITIONS[p]]


# ------------------------------------------------------------------ where connections start
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_sasl_listener_starts_awaiting_the_handshake_as_anonymous(protocol):
    state = ConnectionState.for_listener(protocol, CERTIFICATE)  # a certificate names no one
    assert _facts(state) == (Phase.AWAITING_HANDSHAKE, ANONYMOUS, False, False, None)


def test_an_ssl_listener_starts_open_as_the_certificates_subject():
    state = ConnectionState.for_listener("SSL", CERTIFICATE)
    assert _facts(state) == (Phase.OPEN, "User:CN=carol,O=acme", True, False, None)


@pytest.mark.parametrize(
    ("protocol", "peercert"), [("SSL", None), ("SSL", {}), ("PLAINTEXT", None)]
)
def test_a_listener_without_sasl_or_a_certificate_starts_open_as_anonymous(protocol, peercert):
    state = ConnectionState.for_listener(protocol, peercert)
    assert _facts(state) == (Phase.OPEN, ANONYMOUS, True, False, None)


def test_a_sasl_connection_cannot_start_with_a_principal():
    with pytest.raises(ValueError, match="names no one"):
        ConnectionState(sasl=True, principal=ALICE)


# ------------------------------------------------------------------ the table
@pytest.mark.parametrize(("phase", "intent"), ALLOWED, ids=str)
def test_an_allowed_intent_moves_to_the_phase_the_table_names(phase, intent):
    state = _in(phase)
    assert state.allows(intent)
    INTENTS[intent](state)
    assert state.phase is TRANSITIONS[phase][intent]


@pytest.mark.parametrize(("phase", "intent"), REFUSED, ids=str)
def test_an_intent_the_table_lacks_is_refused_and_changes_nothing(phase, intent):
    state = _in(phase)
    before = _facts(state)
    assert not state.allows(intent)
    with pytest.raises(IllegalTransition, match=f"{intent.value} refused while {phase.value}"):
        INTENTS[intent](state)
    assert _facts(state) == before


def test_every_phase_is_reached_from_a_start_and_every_move_is_tested():
    assert all(PATHS[p] for p in Phase)
    assert len(ALLOWED) + len(REFUSED) == len(Phase) * len(Intent)


def test_authentication_comes_only_from_a_sasl_exchange():
    """The one security rule the table exists for: no path to AUTHENTICATED skips the
    handshake and the exchange, and none starts from a connection that was open."""
    for start, path in PATHS[Phase.AUTHENTICATED]:
        assert start is Phase.AWAITING_HANDSHAKE
        assert path == [Intent.HANDSHAKE, Intent.AUTHENTICATED_AS]


def test_any_phase_but_closing_may_refuse_and_closing_is_the_end():
    assert all(
        TRANSITIONS[p][Intent.REFUSE] is Phase.CLOSING for p in Phase if p is not Phase.CLOSING
    )
    assert TRANSITIONS[Phase.CLOSING] == {}


# ------------------------------------------------------------------ what each phase means
@pytest.mark.parametrize("phase", list(Phase))
def test_only_open_and_authenticated_connections_have_every_api_read(phase):
    assert _in(phase).authenticated is (phase in {Phase.OPEN, Phase.AUTHENTICATED})


@pytest.mark.parametrize("phase", list(Phase))
def test_only_a_closing_connection_ends_after_the_response(phase):
    assert _in(phase).closing is (phase is Phase.CLOSING)


@pytest.mark.parametrize("phase", list(Phase))
def test_the_exchange_is_held_only_while_exchanging(phase):
    assert (_in(phase).exchange is not None) is (phase is Phase.EXCHANGING)


def test_the_handshake_keeps_the_mechanisms_exchange():
    state, exchange = ConnectionState(sasl=True), _exchange()
    state.handshake(exchange)
    assert state.exchange is exchange
    assert state.principal == ANONYMOUS and not state.authenticated


def test_authenticating_names_the_principal_and_drops_the_exchange():
    state = _in(Phase.EXCHANGING)
    state.authenticated_as(ALICE)
    assert _facts(state) == (Phase.AUTHENTICATED, ALICE, True, False, None)


@pytest.mark.parametrize("phase", [Phase.OPEN, Phase.AUTHENTICATED, Phase.EXCHANGING])
def test_a_refused_connection_keeps_its_principal_and_reads_nothing_more(phase):
    state = _in(phase)
    principal = state.principal
    state.refuse()
    assert _facts(state) == (Phase.CLOSING, principal, False, True, None)


# ------------------------------------------------------------------ one owner
@pytest.mark.parametrize("field", ["phase", "principal", "authenticated", "closing", "exchange"])
def test_no_field_is_written_but_by_an_intent(field):
    state = ConnectionState(sasl=True)
    with pytest.raises(AttributeError, match="moves only by its intents"):
        setattr(state, field, True)
    with pytest.raises(AttributeError, match="moves only by its intents"):
        delattr(state, field)
    assert _facts(state) == (Phase.AWAITING_HANDSHAKE, ANONYMOUS, False, False, None)
