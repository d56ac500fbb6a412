"""The credential security checks SCRAM and PLAIN logins against: its own type, so that the
authentication code does not depend on how or where credentials are stored."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism (RFC 5802): the salted, iterated form only,
    never the password."""

    username: str
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
