"""SCRAM credentials (RFC 5802 / 7677) made and checked with scramp: the store only ever holds
the salted, iterated form, from which PLAIN passwords can be verified too."""

from __future__ import annotations

import hmac
import re

from scramp import ScramMechanism

from shareproxy.persistence.security_store import ScramCredential

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS = 4096  # Kafka's default for kafka-configs --add-config SCRAM-SHA-*
_USERNAME = re.compile(r"^[^\x00-\x1f\x7f,=:]{1,255}$")


class InvalidUser(ValueError):
    pass


def check_username(username: str) -> str:
    if not _USERNAME.match(username):
        raise InvalidUser(
            f"user name {username!r} must be 1-255 characters without control characters, "
            "',', '=' or ':'"
        )
    return username


def make_credentials(
    username: str, password: str, iterations: int = ITERATIONS
) -> list[ScramCredential]:
    check_username(username)
    if not password:
        raise InvalidUser("the password must not be empty")
    if iterations < 4096:
        raise InvalidUser("SCRAM iterations must be at least 4096")
    out = []
    for name in MECHANISMS:
        salt, stored_key, server_key, count = ScramMechanism(name).make_auth_info(
            password, iteration_count=iterations
        )
        out.append(ScramCredential(username, name, salt, stored_key, server_key, count))
    return out


def verify_password(cred: ScramCredential, password: str) -> bool:
    """Recompute StoredKey from the password with the stored salt and iterations."""
    _, stored_key, _, _ = ScramMechanism(cred.mechanism).make_auth_info(
        password, iteration_count=cred.iterations, salt=cred.salt
    )
    return hmac.compare_digest(stored_key, cred.stored_key)
