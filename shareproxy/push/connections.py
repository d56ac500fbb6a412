"""The HTTP connections of one group's push: ``max_in_flight`` pools of one kept-alive
connection each, a request taking a free one.

httpcore (httpx's transport) is used directly: the pushes need none of what httpx's client adds
over it (cookies, auth flows, redirects, the environment's proxies), and those layers were a
third of a push's CPU (bench.push). One pool of many connections costs CPU per request in
proportion to its size (httpcore checks every pooled connection for each request it places:
4 ms a request at 64 connections, measured); a pool per connection makes placing a request
O(1), and a request never waits for a connection, since no more requests are under way than
there are pools."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import httpcore

# no answer: nothing reached the endpoint, or its answer did not reach us whole
NO_ANSWER = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    TimeoutError,
)
_RETRY_AFTER = b"retry-after"
# the most of an answer's body read (and dropped): a longer one ends its connection instead,
# so an endpoint answering with a huge body costs no memory
BODY_READ_MAX = 64 * 1024
# an idle connection is not used again after this long: servers close idle ones (uvicorn after
# 5 s), and a request on a connection the server is closing fails without reaching it
KEEPALIVE_EXPIRY_S = 4.0


@dataclass(frozen=True, slots=True)
class Answered:
    status: int
    retry_after: str | None


class Connections:
    def __init__(self, count: int, ca_bundle: str | None) -> None:
        context = ssl.create_default_context(cafile=ca_bundle)  # one for all: loading CAs costs
        self._free = [
            httpcore.AsyncConnectionPool(
                ssl_context=context,
                max_connections=1,
                max_keepalive_connections=1,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            )
            for _ in range(count)
        ]
        self._all = list(self._free)

    async def post(
        self, url: str, headers: Sequence[tuple[str, str]], body: bytes, timeout_s: float
    ) -> Answered:
        """POST on a free connection, the whole exchange within ``timeout_s``; one of
        ``NO_ANSWER`` when there is no answer. The pusher starts no more requests than there
        are connections, so one is always free."""
        pool = self._free.pop()
        try:
            async with (
                asyncio.timeout(timeout_s),
                pool.stream(
                    "POST",
                    url,
                    headers=list(headers),
                    content=body,
                    extensions={"timeout": dict.fromkeys(("connect", "read", "write"), timeout_s)},
                ) as response,
            ):
                read = 0
                async for chunk in response.aiter_stream():
                    read += len(chunk)
                    if read > BODY_READ_MAX:
                        break
                retry_after = next(
                    (v.decode("latin-1") for k, v in response.headers if k.lower() == _RETRY_AFTER),
                    None,
                )
                return Answered(response.status, retry_after)
        finally:
            self._free.append(pool)

    async def aclose(self) -> None:
        for pool in self._all:
            await pool.aclose()
