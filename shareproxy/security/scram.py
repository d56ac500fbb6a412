"""SCRAM credentials (RFC 5802 / 7677) made and checked with scramp: the store only ever holds
the salted, iterated form, from which PLAIN passwords can be verified too."""

from __future__ import annotations

import hmac

from scramp import ScramException, ScramMechanism

from shareproxy.core.names import password_problem, user_name_problem
from shareproxy.security.credentials import ScramCredential

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS = 4096  # Kafka's default for kafka-configs --add-config SCRAM-SHA-*
# Kafka's bounds (ScramMechanism): more iterations only make each login and each new user cost
# more; a million would hold the admin API for seconds
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


class InvalidUser(ValueError):
    pass


def make_credentials(
    username: str, password: str, iterations: int = ITERATIONS
) -> list[ScramCredential]:
    problem = user_name_problem(username) or password_problem(password)
    if problem is not None:
        raise InvalidUser(problem)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InvalidUser(
            f"SCRAM iterations must be within [{MIN_ITERATIONS}, {MAX_ITERATIONS}] (as Kafka's)"
        )
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
