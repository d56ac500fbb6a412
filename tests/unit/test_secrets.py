"""A password is hidden wherever a URL is shown, in whatever shape the URL comes; a config
file's ``${NAME}`` reads the variable, and names the one that is not set."""

from __future__ import annotations

import pytest

from shareproxy.settings.references import expand, reference
from shareproxy.telemetry.secrets import hide_passwords


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ("postgres://me:pw@db/x", "postgres://me:***@db/x"),
        ("postgresql://:pw@db/x", "postgresql://:***@db/x"),
        ("'me:pw@127.0.0.1/x' is not a URL", "'me:***@127.0.0.1/x' is not a URL"),
        (
            "postgresql://me@db/x?sslmode=require&password=pw",
            "postgresql://me@db/x?sslmode=require&password=***",
        ),
        ("cannot reach me:pw@127.0.0.1:9092", "cannot reach me:***@127.0.0.1:9092"),
        # no password: left as it is
        ("postgresql://me@db/x", "postgresql://me@db/x"),
        ("sqlite:///tmp/a@b/state.db", "sqlite:///tmp/a@b/state.db"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("mail me@example.com: now", "mail me@example.com: now"),
    ],
)
def test_a_password_is_hidden_in_any_shape_of_url(shown, expected):
    assert hide_passwords(shown) == expected


def test_a_reference_reads_its_variable_and_names_one_that_is_not_set():
    data = {"state_url": "postgresql://me:${PW}@db/x", "listen": "0.0.0.0:9092", "nodes": 2}
    assert expand(data, {"PW": "s"}) == ({**data, "state_url": "postgresql://me:s@db/x"}, "")
    _, missing = expand({"state_url": reference("SHAREPROXY_STATE_URL")}, {})
    assert missing == "state_url names ${SHAREPROXY_STATE_URL}, which is not set"
