"""Which clients fetch from one leader at a time, by the software ApiVersions v3+ names."""

from __future__ import annotations

import pytest

from shareproxy.kafka.client_software import (
    fetch_wait_ms,
    fetches_one_leader_at_a_time,
)
from shareproxy.settings.model import LIBRDKAFKA_FETCH_WAIT_MS


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0"),  # as the client sends it
        ("confluent-kafka-go", "2.16.0"),
        ("confluent-kafka-dotnet", "2.16.0"),
        ("librdkafka", "2.16.0"),
        ("my-wrapper", "1.0-rdkafka-2.16.0"),
    ],
)
def test_librdkafka_and_what_is_built_on_it(name: str, version: str) -> None:
    assert fetches_one_leader_at_a_time(name, version)


@pytest.mark.parametrize(
    ("name", "version"),
    [("apache-kafka-java", "4.3.0"), ("sarama", "1.45"), ("", ""), (None, None)],
)
def test_other_clients_keep_the_wait_they_ask_for(name: str | None, version: str | None) -> None:
    assert not fetches_one_leader_at_a_time(name, version)


WAIT = LIBRDKAFKA_FETCH_WAIT_MS


@pytest.mark.parametrize(
    ("asked", "one_at_a_time", "serving", "held"),
    [
        (500, True, (1, 2), WAIT),  # other nodes lead: ask them next
        (500, True, (2, 3), WAIT),  # this node's lease lapsed: others serve
        (500, True, (1,), 500),  # alone: nobody else to ask
        (500, True, (), 500),  # no placement yet
        (WAIT, True, (1, 2), WAIT),
        (50, True, (1, 2), 50),  # shorter than the cap: as asked
        (0, True, (1, 2), 0),
        (500, False, (1, 2), 500),  # fetches every leader at once: as asked
    ],
)
def test_the_fetch_wait(
    asked: int, one_at_a_time: bool, serving: tuple[int, ...], held: int
) -> None:
    assert fetch_wait_ms(asked, one_at_a_time, serving, node_id=1, cap_ms=WAIT) == held


def test_a_cap_at_or_over_the_wait_asked_holds_as_asked() -> None:
    assert fetch_wait_ms(500, True, (1, 2), node_id=1, cap_ms=500) == 500
    assert fetch_wait_ms(500, True, (1, 2), node_id=1, cap_ms=1000) == 500
