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
from http import HTTPStatus
from typing import Any, Protocol, TypeVar

from fastapi import Request, Response

from shareproxy.admin.path_names import sent_path, sent_query
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.runtime.cluster import NodeAddress
from shareproxy.runtime.groups import GroupAdmin, Listed
from shareproxy.telemetry.logs import first_line

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


class Answered(Exception):  # not an error: the coordinator's answer, to return
    """The coordinating node's answer to a call passed on to it."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class CoordinatorUnreachable(Exception):
    """The node that coordinates the group did not answer (HTTP 503, retriable)."""


async def coordinator_answers(request: Request, admin: GroupAdmin, group_id: str) -> None:
    """Return when this node answers the call itself; raise Answered with the coordinating
    node's answer when another live node coordinates the group. Called once the caller is
    authenticated and authorized here."""
    elsewhere = admin.coordinated_elsewhere(group_id)
    if elsewhere is not None:
        held = f"share group {group_id!r} is coordinated by {elsewhere.described}"
        await _answered_there(request, elsewhere, ErrorCode.NOT_COORDINATOR, held, "coordinator")


async def leader_answers(request: Request, admin: GroupAdmin, topic: str, partition: int) -> None:
    """As ``coordinator_answers``, for a call about one share-partition: its live records are
    held by the node leading the partition, which may not coordinate the group."""
    elsewhere = await admin.records.led_elsewhere(topic, partition)
    if elsewhere is not None:
        held = f"{topic}:{partition} is led by {elsewhere.described}"
        await _answered_there(request, elsewhere, ErrorCode.NOT_LEADER_OR_FOLLOWER, held, "leader")


async def _answered_there(
    request: Request, node: NodeAddress, refusal: ErrorCode, held: str, role: str
) -> None:
    """Raise Answered with ``node``'s answer, or ``refusal`` where the call cannot go there:
    it was passed on already (once at most), or the node has no admin API address."""
    if request.headers.get(FORWARDED_HEADER) is not None:
        raise ShareError(
            refusal,
            f"{held}, and this call was already passed on by another node that took this one "
            f"for its {role}: the nodes' views of the live nodes differ for a moment (a node "
            "joined or left); retry",
        )
    if not node.admin_url:
        raise ShareError(
            refusal,
            f"{held}, which advertises no admin API address to pass the call on to: call that "
            "node's admin API, or give it --admin-advertised-url",
        )
    answer = await call_on(request, node, node.admin_url)
    if answer.status_code == HTTPStatus.MISDIRECTED_REQUEST:  # its NOT_COORDINATOR
        # it takes another node for the holder: a moment while a node joins or leaves
        raise ShareError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"{held}, which takes another node for its {role}: the nodes' views of the live "
            "nodes differ for a moment (a node joined or left); retry",
        )
    raise Answered(answer)


class HasPeers(Protocol):
    def peers(self) -> list[NodeAddress]: ...


async def on_every_peer(
    request: Request, admin: HasPeers, parse: Callable[[Any], T]
) -> tuple[list[T], list[str]]:
    """The same call made on each other live node (for what each node holds of its own, such
    as a member's locks): their answers read by ``parse``, and the nodes that did not answer
    with 200 and a body ``parse`` takes (a node of another version, say). A call passed on is
    made only where it lands."""
    if request.headers.get(FORWARDED_HEADER) is not None:
        return [], []
    peers = [p for p in admin.peers() if p.admin_url]
    answers = await asyncio.gather(
        *(call_on(request, p, p.admin_url or "") for p in peers), return_exceptions=True
    )
    got: list[T] = []
    missed = [f"{p.described}: no admin API address" for p in admin.peers() if not p.admin_url]
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


async def call_on(
    request: Request,
    node: NodeAddress,
    admin_url: str,
    content: bytes | None = None,
    answer_timeout_s: float = ANSWER_TIMEOUT_S,
) -> Response:
    """The call made on another node, with the caller's body or ``content`` in its place."""
    import httpx  # loaded by the first call passed on: a node alone never needs it

    headers = {h: v for h in REQUEST_HEADERS if (v := request.headers.get(h)) is not None}
    headers[FORWARDED_HEADER] = "1"
    url = admin_url.rstrip("/") + sent_path(request)
    timeout = httpx.Timeout(answer_timeout_s, connect=CONNECT_TIMEOUT_S)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            answer = await client.request(
                request.method,
                url,
                params=sent_query(request) or None,
                content=await request.body() if content is None else content,
                headers=headers,
            )
    except httpx.HTTPError as exc:
        why = first_line(exc) or type(exc).__name__
        log.warning(
            "passing %s %s on to %s failed: %s",
            request.method,
            request.url.path,
            node.described,
            why,
            extra={"node": node.node_id},
        )
        raise CoordinatorUnreachable(
            f"the share group is coordinated by {node.described}, which cannot be reached "
            f"({why}); retry: if that node is down, another one takes the group over once "
            "its lease passes"
        ) from None
    kept = {h: v for h in ANSWER_HEADERS if (v := answer.headers.get(h)) is not None}
    return Response(answer.content, answer.status_code, headers=kept)


def passed_on(request: Request) -> bool:
    """The call was passed on by another node: answer what this node knows, nothing more."""
    return request.headers.get(FORWARDED_HEADER) is not None


async def listed_elsewhere(request: Request, admin: GroupAdmin) -> dict[int, dict[str, Listed]]:
    """Each other live node's list of groups, by node id: each knows the state, members and
    subscribed topics of the groups it coordinates. A node that cannot be asked is left out
    (its groups are listed as stored); a call passed on lists only what this node knows."""
    if passed_on(request):
        return {}
    peers = [p for p in admin.peers() if p.admin_url]
    answers = await asyncio.gather(*(_listed_by(request, p) for p in peers))
    return {p.node_id: listed for p, listed in zip(peers, answers, strict=True) if listed}


async def _listed_by(request: Request, node: NodeAddress) -> dict[str, Listed] | None:
    import httpx

    headers = {h: v for h in REQUEST_HEADERS if (v := request.headers.get(h)) is not None}
    headers[FORWARDED_HEADER] = "1"
    url = f"{(node.admin_url or '').rstrip('/')}{sent_path(request)}"
    timeout = httpx.Timeout(ANSWER_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            answer = await client.get(url, headers=headers)
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
    except (httpx.HTTPError, ValueError, KeyError, TypeError, OverflowError) as exc:
        log.warning(
            "listing the groups of %s failed: %s; its groups are listed as stored",
            node.described,
            first_line(exc) or type(exc).__name__,
            extra={"node": node.node_id},
        )
        return None
