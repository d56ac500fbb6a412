"""The server side of SCRAM against scramp's own client, on whichever scramp the install
resolved: the exchange must name the principal and refuse a wrong proof or an unknown user."""

from __future__ import annotations

import pytest
from scramp import ScramClient

from shareproxy.security.sasl import SaslExchange, SaslFailed
from shareproxy.security.scram import MECHANISMS, make_credentials


def _lookup(user: str, password: str):
    stored = {(c.username, c.mechanism): c for c in make_credentials(user, password)}
    return lambda name, mechanism: stored.get((name, mechanism))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_scram_exchange_authenticates_and_names_the_principal(mechanism):
    server = SaslExchange(mechanism, _lookup("alice", "right-Pass-1"))
    client = ScramClient([mechanism], "alice", "right-Pass-1")
    server_first = server.step(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # raises unless the server proved itself
    assert server.principal == "User:alice"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong-Pass-2"), ("mallory", "x")])
def test_scram_refuses_a_wrong_password_or_an_unknown_user(user, password):
    server = SaslExchange("SCRAM-SHA-512", _lookup("alice", "right-Pass-1"))
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    with pytest.raises(SaslFailed, match="invalid credentials"):
        client.set_server_first(server.step(client.get_client_first().encode()).decode())
        server.step(client.get_client_final().encode())
    assert server.principal is None


@pytest.mark.parametrize("iterations", [4095, 16385, 883_933])
def test_scram_iterations_stay_within_kafkas_bounds(iterations):
    """A million iterations would hold the admin API for seconds (the REST fuzzer found it)."""
    from shareproxy.security.scram import InvalidUser, make_credentials

    with pytest.raises(InvalidUser, match=r"within \[4096, 16384\]"):
        make_credentials("alice", "secret-pw", iterations)
    assert make_credentials("alice", "secret-pw", 16384)[0].iterations == 16384
