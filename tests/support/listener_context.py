"""What a Kafka listener needs of its context in the tests that answer requests themselves
(``_answer`` replaced): a connection that closes has no share session to end."""

from __future__ import annotations

from typing import Any


class _NoSessions:
    async def connection_closed(self, connection: int) -> None:
        """No share session was opened on any connection."""


class ListenerOnly:
    consumers = _NoSessions()


def listener_only() -> Any:
    """A stand-in for the ``BrokerContext`` a listener is given."""
    return ListenerOnly()
