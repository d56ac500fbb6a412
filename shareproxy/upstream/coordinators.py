"""Where the upstream cluster keeps its coordinators, and which API versions all its brokers
speak: what the proxy needs to relay group and transaction requests without ever showing a
client an upstream address."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kio.schema.api_versions.v3 import request as av_req
from kio.schema.find_coordinator.v3 import request as fc3_req
from kio.schema.find_coordinator.v4 import request as fc4_req
from kio.static.primitive import i8

from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.upstream.client import Upstream, UpstreamError


async def cluster_versions(upstream: Upstream) -> dict[int, tuple[int, int]]:
    """The versions of each API every known upstream broker supports (their intersection): a
    relayed request may go to any of them."""
    nodes = {b.nodeId for b in upstream.client.cluster.brokers()} or {await upstream.any_node()}
    request = av_req.ApiVersionsRequest(
        client_software_name="shareproxy", client_software_version="1"
    )
    answers = await asyncio.gather(*(upstream.send(n, request) for n in sorted(nodes)))
    common: dict[int, tuple[int, int]] | None = None
    for answer in answers:
        if answer.error_code != ErrorCode.NONE:
            raise UpstreamError(f"upstream ApiVersions failed: {answer.error_code!r}")
        versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys
        }
        common = versions if common is None else _intersect(common, versions)
    return common or {}


def _intersect(
    a: Mapping[int, tuple[int, int]], b: Mapping[int, tuple[int, int]]
) -> dict[int, tuple[int, int]]:
    out = {}
    for key in a.keys() & b.keys():
        low, high = max(a[key][0], b[key][0]), min(a[key][1], b[key][1])
        if low <= high:
            out[key] = (low, high)
    return out


class Coordinators:
    """The upstream node coordinating each group and transactional id, looked up with
    FindCoordinator and cached until a relayed answer says it moved."""

    def __init__(self, upstream: Upstream, versions: Mapping[int, tuple[int, int]]) -> None:
        self.upstream = upstream
        self.versions = versions
        self._nodes: dict[tuple[int, str], int] = {}

    async def node_for(self, key_type: int, key: str) -> int:
        """The coordinator's node id; UpstreamError with Kafka's retriable code when the
        cluster has none yet (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS)."""
        cached = self._nodes.get((key_type, key))
        if cached is not None:
            return cached
        node, code = await self._find(key_type, key)
        if code != ErrorCode.NONE or node < 0:
            raise UpstreamError(
                f"no upstream coordinator for {key!r} yet (error {code})",
                code if code != ErrorCode.NONE else ErrorCode.COORDINATOR_NOT_AVAILABLE,
            )
        self._nodes[(key_type, key)] = node
        return node

    def moved(self, key_type: int, key: str) -> None:
        """A relayed answer said NOT_COORDINATOR (or the node is gone): look it up again."""
        self._nodes.pop((key_type, key), None)

    async def _find(self, key_type: int, key: str) -> tuple[int, int]:
        high = self.versions.get(ApiKey.FIND_COORDINATOR, (0, 3))[1]
        asked = await self.upstream.any_node()
        if high >= 4:
            response = await self.upstream.send(
                asked,
                fc4_req.FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,)),
            )
            found = response.coordinators[0]
            return int(found.node_id), int(found.error_code)
        response = await self.upstream.send(
            asked, fc3_req.FindCoordinatorRequest(key=key, key_type=i8(key_type))
        )
        return int(response.node_id), int(response.error_code)
