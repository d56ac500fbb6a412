"""Where one client connection stands with authentication, and the only code that moves it.

On a SASL listener a connection may send nothing but ApiVersions and the SASL exchange until
the exchange names its principal, and a refused step ends it after that step's answer. Each
move is an intent checked against ``TRANSITIONS``, so no handler can skip a step, authenticate
twice or revive a connection that is closing. Nothing here does I/O: the handlers choose the
answer, the listener closes. The fields are plain slots, read on every request as cheaply as
any attribute; only the intents write them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shareproxy.security.listeners import certificate_principal

if TYPE_CHECKING:
    from shareproxy.security.sasl import SaslExchange

ANONYMOUS = "User:ANONYMOUS"


class Phase(enum.Enum):
    OPEN = "open"  # a PLAINTEXT or SSL listener: nothing to prove
    AWAITING_HANDSHAKE = "awaiting the SASL handshake"  # a SASL listener's start
    EXCHANGING = "exchanging SASL tokens"  # a mechanism chosen, its exchange under way
    AUTHENTICATED = "authenticated"  # the exchange named the principal
    CLOSING = "closing after the response"  # a step was refused: its answer is the last


class Intent(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATED_AS = "authenticated_as"
    REFUSE = "refuse"


# phase → intent → the phase it leads to; an intent missing from a phase is refused
TRANSITIONS: Mapping[Phase, Mapping[Intent, Phase]] = {
    Phase.OPEN: {Intent.REFUSE: Phase.CLOSING},
    Phase.AWAITING_HANDSHAKE: {Intent.HANDSHAKE: Phase.EXCHANGING, Intent.REFUSE: Phase.CLOSING},
    Phase.EXCHANGING: {Intent.AUTHENTICATED_AS: Phase.AUTHENTICATED, Intent.REFUSE: Phase.CLOSING},
    Phase.AUTHENTICATED: {Intent.REFUSE: Phase.CLOSING},
    Phase.CLOSING: {},
}

SERVING = frozenset({Phase.OPEN, Phase.AUTHENTICATED})  # every API is read, not just SASL's


class IllegalTransition(RuntimeError):
    """An intent the phase does not allow: a defect in the proxy, not the client's mistake,
    which the handlers see with ``allows`` first and answer in Kafka's terms."""


_set = object.__setattr__  # the intents' own way past ``__setattr__``


class ConnectionState:
    """One connection's phase and what follows from it. A SASL listener's connection starts
    awaiting the handshake as ANONYMOUS (a TLS certificate there names no one, as in Kafka);
    any other starts open, as ``principal``."""

    __slots__ = ("authenticated", "closing", "exchange", "phase", "principal")

    phase: Phase
    principal: str  # whom the ACLs are asked about
    authenticated: bool  # whether every API is read (the phase is in SERVING)
    closing: bool  # whether the connection ends once this request is answered
    exchange: SaslExchange | None  # the mechanism's exchange, while EXCHANGING only

    def __init__(self, *, sasl: bool = False, principal: str = ANONYMOUS) -> None:
        if sasl and principal != ANONYMOUS:
            raise ValueError("a SASL listener's connection names no one before SASL")
        _set(self, "principal", principal)
        self._enter(Phase.AWAITING_HANDSHAKE if sasl else Phase.OPEN)

    @classmethod
    def for_listener(cls, protocol: str, peercert: dict[str, Any] | None) -> ConnectionState:
        """A new connection of the listener for ``protocol``; ``peercert`` is the client's TLS
        certificate, which names the principal on SSL (ANONYMOUS without one)."""
        if protocol.startswith("SASL_"):
            return cls(sasl=True)
        if protocol == "SSL":
            return cls(principal=certificate_principal(peercert) or ANONYMOUS)
        return cls()

    def allows(self, intent: Intent) -> bool:
        return intent in TRANSITIONS[self.phase]

    def handshake(self, exchange: SaslExchange) -> None:
        """SaslHandshake chose a mechanism: its tokens come next."""
        self._move(Intent.HANDSHAKE)
        _set(self, "exchange", exchange)

    def authenticated_as(self, principal: str) -> None:
        """The exchange proved who the client is: every API is read, as ``principal``."""
        self._move(Intent.AUTHENTICATED_AS)
        _set(self, "principal", principal)

    def refuse(self) -> None:
        """The request broke the SASL rules (or failed them): answer it, then close."""
        self._move(Intent.REFUSE)

    def _move(self, intent: Intent) -> None:
        after = TRANSITIONS[self.phase].get(intent)
        if after is None:
            raise IllegalTransition(f"{intent.value} refused while {self.phase.value}")
        self._enter(after)

    def _enter(self, phase: Phase) -> None:
        """The one place a phase is entered: what is derived from it cannot drift."""
        _set(self, "phase", phase)
        _set(self, "authenticated", phase in SERVING)
        _set(self, "closing", phase is Phase.CLOSING)
        _set(self, "exchange", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{name}: a connection's state moves only by its intents")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{name}: a connection's state moves only by its intents")

    def __repr__(self) -> str:
        return f"<ConnectionState {self.phase.value} as {self.principal}>"
