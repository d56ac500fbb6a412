"""A REST call about a share group that reaches a node which does not coordinate the group is
passed on to the node that does, and its answer (status and body) returned unchanged, so the
admin API and the CLI work against any node. The caller is authenticated and authorized where
it arrived first (a refused caller is answered there); its credentials travel with the call,
so the coordinator checks them again. A call passed on once is marked and never passed on
again: a node that receives one for a group it does not coordinate answers 421."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Request, Response

from shareproxy.admin.path_names import sent_path, sent_query
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.runtime.groups import Listed
from shareproxy.telemetry.logs import first_line

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

log = logging.getLogger(__name__)

# marks a call one node passed on to another: it is answered where it lands
FORWARDED_HEADER = "x-shareproxy-forwarded"
# what of the caller's request travels with it, and what of the answer comes back
REQUEST_HEADERS = ("authorization", "content-type", "accept")
ANSWER_HEADERS = ("content-type", "www-authenticate", "retry-after")
# a node that does not answer within this is taken to be down (its lease passes soon)
CONNECT_TIMEOUT_S = 3.0
ANSWER_TIMEOUT_S = 30.0  # within the CLI's own 60 s, so its caller hears the 503
# an idle connection to another node is dropped well before uvicorn ends it there (after 5 s),
# so a call never goes out on a connection the other end is closing
IDLE_CONNECTION_S = 2.0


class CoordinatorUnreachable(Exception):
    """The node that coordinates the group did not answer (HTTP 503, retriable)."""


class Unanswered(Exception):
    """Another node did not answer a call (it could not be reached, or timed out)."""


def sent_headers(request: Request) -> dict[str, str]:
    """A call passed on carries the caller's credentials and content type, and says it was."""
    headers = {h: v for h in REQUEST_HEADERS if (v := request.headers.get(h)) is not None}
    headers[FORWARDED_HEADER] = "1"
    return headers


class PeerClient:
    """The admin server's one HTTP client for the calls it passes on: made at the first (a node
    alone never loads httpx), closed when the server stops."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    async def send(
        self,
        request: Request,
        node: NodeAddress,
        content: bytes | None,
        answer_timeout_s: float,
        *,
        with_query: bool = True,
    ) -> httpx.Response:
        """``request`` made on ``node`` (which has an admin API address) with ``content`` as
        its body; Unanswered when the node does not answer."""
        import httpx  # loaded by the first call passed on: a node alone never needs it

        if self._client is None:
            self._client = httpx.AsyncClient(
                limits=httpx.Limits(
                    max_connections=None,
                    max_keepalive_connections=20,
                    keepalive_expiry=IDLE_CONNECTION_S,
                ),
                # one client for every caller: a cookie one node's answer sets is never kept
                cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
            )
        try:
            return await self._client.request(
                request.method,
                (node.admin_url or "").rstrip("/") + sent_path(request),
                params=(sent_query(request) or None) if with_query else None,
                content=content,
                headers=sent_headers(request),
                timeout=httpx.Timeout(answer_timeout_s, connect=CONNECT_TIMEOUT_S),
            )
        except httpx.HTTPError as exc:
            raise Unanswered(first_line(exc) or type(exc).__name__) from None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


@dataclass(frozen=True, slots=True)
class OtherNodes:
    """The other live nodes as one call reaches them. A call passed on already is answered where
    it landed: it reaches no other node."""

    request: Request
    client: PeerClient
    live: Callable[[], list[NodeAddress]]

    @property
    def passed_on(self) -> bool:
        """The call was passed on by another node: answer what this node knows, nothing more."""
        return self.request.headers.get(FORWARDED_HEADER) is not None

    async def call_on(
        self,
        node: NodeAddress,
        content: bytes | None = None,
        answer_timeout_s: float = ANSWER_TIMEOUT_S,
    ) -> Response:
        """The call made on ``node``, with the caller's body or ``content`` in its place."""
        body = await self.request.body() if content is None else content
        try:
            answer = await self.client.send(self.request, node, body, answer_timeout_s)
        except Unanswered as exc:
            log.warning(
                "passing %s %s on to %s failed: %s",
                self.request.method,
                self.request.url.path,
                node.described,
                exc,
                extra={"node": node.node_id},
            )
            raise CoordinatorUnreachable(
                f"the share group is coordinated by {node.described}, which cannot be reached "
                f"({exc}); retry: if that node is down, another one takes the group over once "
                "its lease passes"
            ) from None
        kept = {h: v for h in ANSWER_HEADERS if (v := answer.headers.get(h)) is not None}
        return Response(answer.content, answer.status_code, headers=kept)

    async def answer_there(
        self, node: NodeAddress, refusal: ErrorCode, held: str, role: str
    ) -> Response:
        """``node``'s answer to the call, or ``refusal`` where the call cannot go there: it was
        passed on already (once at most), or the node has no admin API address."""
        if self.passed_on:
            raise ShareError(
                refusal,
                f"{held}, and this call was already passed on by another node that took this "
                f"one for its {role}: the nodes' views of the live nodes differ for a moment (a "
                "node joined or left); retry",
            )
        if not node.admin_url:
            raise ShareError(
                refusal,
                f"{held}, which advertises no admin API address to pass the call on to: call "
                "that node's admin API, or give it --admin-advertised-url",
            )
        answer = await self.call_on(node)
        if answer.status_code == HTTPStatus.MISDIRECTED_REQUEST:  # its NOT_COORDINATOR
            # it takes another node for the holder: a moment while a node joins or leaves
            raise ShareError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{held}, which takes another node for its {role}: the nodes' views of the "
                "live nodes differ for a moment (a node joined or left); retry",
            )
        return answer

    async def answers(self, parse: Callable[[Any], T]) -> tuple[list[T], list[str]]:
        """The same call made on each other live node (for what each node holds of its own,
        such as a member's locks): their answers read by ``parse``, and the nodes that did not
        answer with 200 and a body ``parse`` takes (a node of another version, say)."""
        if self.passed_on:
            return [], []
        live = self.live()
        peers = [p for p in live if p.admin_url]
        answers = await asyncio.gather(*(self.call_on(p) for p in peers), return_exceptions=True)
        got: list[T] = []
        missed = [f"{p.described}: no admin API address" for p in live if not p.admin_url]
        for peer, answer in zip(peers, answers, strict=True):
            if not isinstance(answer, Response):
                missed.append(f"{peer.described}: not reachable")
            elif answer.status_code != 200:
                text = bytes(answer.body)[:300].decode(errors="replace")
                missed.append(f"{peer.described}: HTTP {answer.status_code} {text}")
            else:
                try:
                    got.append(parse(json.loads(bytes(answer.body))))
                except ValueError as exc:  # pydantic's ValidationError is one too
                    missed.append(f"{peer.described}: answer not understood ({first_line(exc)})")
        return got, missed

    async def listed(self) -> dict[int, dict[str, Listed]]:
        """Each other live node's list of groups, by node id: each knows the state, members and
        subscribed topics of the groups it coordinates. A node that cannot be asked is left out
        (its groups are listed as stored); a call passed on lists only what this node knows."""
        if self.passed_on:
            return {}
        peers = [p for p in self.live() if p.admin_url]
        answers = await asyncio.gather(*(self._listed_by(p) for p in peers))
        return {p.node_id: listed for p, listed in zip(peers, answers, strict=True) if listed}

    async def _listed_by(self, node: NodeAddress) -> dict[str, Listed] | None:
        try:
            answer = await self.client.send(
                self.request, node, None, ANSWER_TIMEOUT_S, with_query=False
            )
            if answer.status_code != 200:
                raise ValueError(f"HTTP {answer.status_code}: {answer.text[:200]}")
            listed = {
                g["group_id"]: Listed(
                    g["state"], int(g.get("members") or 0), tuple(g.get("topics") or ())
                )
                for g in answer.json()
            }
            if not all(isinstance(x.state, str) for x in listed.values()):
                raise ValueError("a group's state is not text")
            return listed
        except (Unanswered, ValueError, KeyError, TypeError, OverflowError) as exc:
            log.warning(
                "listing the groups of %s failed: %s; its groups are listed as stored",
                node.described,
                first_line(exc) or type(exc).__name__,
                extra={"node": node.node_id},
            )
            return None
