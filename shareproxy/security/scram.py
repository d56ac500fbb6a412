"""SCRAM credentials (RFC 5802 / 7677) made and checked with scramp: the store only ever holds
the salted, iterated form, from which PLAIN passwords can be verified too."""

from __future__ import annotations

import hmac

from scramp import ScramException, ScramMechanism

from shareproxy.core.names import password_problem, user_name_problem
from shareproxy.security.credentials import ScramCredential

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS = 4096  # Kafka's default for kafka-configs --add-config SCRAM-SHA-*


class InvalidUser(ValueError):
    pass


def make_credentials(
    username: str, password: str, iterations: int = ITERATIONS
) -> list[ScramCredential]:
    problem = user_name_problem(username) or password_problem(password)
    if problem is not None:
        raise InvalidUser(problem)
    if iterations < 4096:
        raise InvalidUser("SCRAM iterations must be at least 4096")
    out = []
    for name in MECHANISMS:
        try:
            salt, stored_key, server_key, count = ScramMechanism(name).make_auth_info(
                password, iteration_count=iterations
            )
        except ScramException as exc:  # SASLprep refuses the password
            raise InvalidUser(f"the password cannot be used with SCRAM: {exc}") from exc
        out.append(ScramCredential(username, name, salt, stored_key, server_key, count))
    return out


def verify_password(cred: ScramCredential, password: str) -> bool:
    """Recompute StoredKey from the password with the stored salt and iterations."""
    _, stored_key, _, _ = ScramMechanism(cred.mechanism).make_auth_info(
        password, iteration_count=cred.iterations, salt=cred.salt
    )
    return hmac.compare_digest(stored_key, cred.stored_key)
