"""What the proxy knows of the client software at the other end of a connection (ApiVersions
v3+ names it), for the one place where a client's behaviour calls for a different answer.

librdkafka's share consumer (2.16) sends its record-fetching ShareFetch to one broker at a
time: it picks the leader of its next assigned partition, waits for the answer, and only then
asks another. A node with nothing for it holds that fetch for MaxWaitMs (500 ms by default)
while other nodes may have records, so with several proxy nodes such consumers spent much of
their time waiting. Clients that fetch from every leader at once (Kafka's Java client) keep the
wait they asked for: a shorter one would only multiply their empty fetches.
"""

from __future__ import annotations

from collections.abc import Iterable

# librdkafka itself and the wrappers Confluent ships on it (Python, Go, .NET, JavaScript)
_LIBRDKAFKA_NAMES = ("librdkafka",)
_LIBRDKAFKA_PREFIXES = ("confluent-kafka-",)


def fetches_one_leader_at_a_time(name: str | None, version: str | None) -> bool:
    """Whether the named client software is librdkafka or built on it."""
    if not name:
        return False
    return (
        name in _LIBRDKAFKA_NAMES
        or name.startswith(_LIBRDKAFKA_PREFIXES)
        or "rdkafka" in (version or "")
    )


def fetch_wait_ms(
    asked_ms: int, one_leader_at_a_time: bool, serving: Iterable[int], node_id: int, cap_ms: int
) -> int:
    """The MaxWaitMs to hold a ShareFetch for: as asked, but at most ``cap_ms`` for a
    one-leader-at-a-time client while any other node serves. Any, not only the leaders of the
    session's topics: the client's other topics may all be led elsewhere and are not in this
    node's session, so the cost is a few more empty fetches a second from an idle librdkafka
    consumer on a cluster whose other nodes lead nothing of its."""
    if not one_leader_at_a_time or asked_ms <= cap_ms:
        return asked_ms
    if any(n != node_id for n in serving):
        return cap_ms
    return asked_ms
