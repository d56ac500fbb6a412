"""The server side of one connection's SASL exchange (SaslHandshake v1 + SaslAuthenticate).

PLAIN: one message ``authzid NUL user NUL password``. SCRAM-SHA-256/512: client-first →
server-first, client-final → server-final. Credentials come from an in-memory lookup, so the
exchange itself does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from scramp import ScramException, ScramMechanism
from scramp.core import ScramServer

from shareproxy.security.credentials import ScramCredential
from shareproxy.security.scram import MECHANISMS, verify_password

Lookup = Callable[[str, str], ScramCredential | None]  # (user, mechanism) → credential


class SaslFailed(Exception):
    """Authentication failed; the message is safe to send to the client and to log."""


class SaslExchange:
    def __init__(self, mechanism: str, lookup: Lookup) -> None:
        self.mechanism = mechanism
        self.lookup = lookup
        self.principal: str | None = None  # set once authenticated
        self.username: str | None = None  # as claimed, for the failure log
        self._scram: ScramServer | None = None  # once the client-first message is in
        self._step = 0

    def step(self, token: bytes) -> bytes:
        """The server's reply to one client token; ``principal`` is set when done."""
        if self.mechanism == "PLAIN":
            return self._plain(token)
        return self._scram_step(token)

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailed("malformed PLAIN message")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self.username = user
        if authzid and authzid != user:
            raise SaslFailed("authorization id must be empty or the user name")
        cred = self.lookup(user, MECHANISMS[-1])
        if cred is None or not verify_password(cred, password):
            raise SaslFailed(f"authentication failed for user {user!r}: invalid credentials")
        self.principal = f"User:{user}"
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        try:
            if self._step == 0:
                self._step = 1

                def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
                    self.username = user
                    cred = self.lookup(user, self.mechanism)
                    if cred is None:
                        raise ScramException("unknown user")
                    return cred.salt, cred.stored_key, cred.server_key, cred.iterations

                scram = ScramMechanism(self.mechanism).make_server(auth_info)
                self._scram = scram
                scram.set_client_first(text)
                return scram.get_server_first().encode()
            if self._step == 1 and self._scram is not None:
                self._step = 2
                self._scram.set_client_final(text)
                # the name auth_info was asked about: scramp 1.5 keeps no ``user`` attribute
                self.principal = f"User:{self.username}"
                return self._scram.get_server_final().encode()
        except ScramException as exc:
            who = f"user {self.username!r}" if self.username else "the client"
            raise SaslFailed(f"authentication failed for {who}: invalid credentials") from exc
        raise SaslFailed("unexpected SASL message after the exchange completed")
