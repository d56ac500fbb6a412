"""ShareFetch and ShareAcknowledge as a client sends them: kio requests encoded, decoded as the
listener decodes them, answered by the handlers over a runtime of the tests, and the encoded
answers decoded again, so a test reads exactly what a client would."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from shareproxy.core.group_settings import GroupSettings
from shareproxy.kafka.connection_state import ConnectionState
from shareproxy.kafka.context import Connection
from shareproxy.kafka.handlers import share_acknowledge, share_fetch
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response_chunks,
    response_type,
)
from shareproxy.runtime.consuming import ShareConsumers
from shareproxy.settings.model import LIBRDKAFKA_FETCH_WAIT_MS
from shareproxy.upstream.client import TopicInfo
from tests.support.runtime import Runtime

T = TypeVar("T")
_HANDLERS = {
    ApiKey.SHARE_FETCH: share_fetch.handle,
    ApiKey.SHARE_ACKNOWLEDGE: share_acknowledge.handle,
}
_SERVED = {ApiKey.SHARE_FETCH: (1, 2), ApiKey.SHARE_ACKNOWLEDGE: (1, 2)}
_CORRELATION = itertools.count(1)


@dataclass
class WireContext:
    """The ``ShareConsumersContext`` of one node that leads every partition, without ACLs."""

    rt: Runtime
    node_id: int = 0
    leader_epoch: int = 0
    acls_enforced: bool = False
    librdkafka_fetch_wait_ms: int = LIBRDKAFKA_FETCH_WAIT_MS
    live_nodes: list[int] = field(default_factory=lambda: [0])

    @property
    def consumers(self) -> ShareConsumers:
        return self.rt.consumers

    def allowed(self, conn: Connection, *args: Any, **kwargs: Any) -> bool:
        return True

    def leader_of(self, topic_id: UUID, partition: int) -> int:
        return self.node_id

    def topic_by_id(self, topic_id: UUID | None) -> TopicInfo | None:
        return None

    def settings_for(self, group_id: str) -> GroupSettings:
        return self.rt.settings_for(group_id)

    def node_endpoints(
        self, cls: type[T], conn: Connection, node_ids: Iterable[int]
    ) -> tuple[T, ...]:
        return ()


def connection(number: int) -> Connection:
    """A plaintext client connection (ANONYMOUS); its share sessions end with ``number``."""
    return Connection("127.0.0.1", 50_000 + number, "PLAINTEXT", ConnectionState(), number)


async def answer(rt: Runtime, body: Any, conn: Connection) -> Any:
    """The decoded response to ``body`` (a kio ShareFetch or ShareAcknowledge request)."""
    frame = encode_request(next(_CORRELATION), "wire-test", body)[4:]
    request = decode_request(frame, _SERVED)
    encoded = await _HANDLERS[ApiKey(request.api_key)](WireContext(rt), conn, request)
    raw = b"".join(encode_response_chunks(request.correlation_id, encoded))[4:]
    return decode_response(raw, response_type(request.api_key, request.api_version))[1]
