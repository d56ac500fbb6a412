"""Every API in ``kafka/routes.py``: checked against the principal's ACLs, then relayed to the
upstream coordinator or controller as the client encoded it (only the correlation id changes),
and the answer relayed back unchanged. The client never sees an upstream address: it asked the
proxy for its coordinator and was told the proxy.

Upstream trouble answers with the retriable error Kafka's own broker would give: a coordinator
that cannot be reached or has moved is COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR (the client
looks it up again, and so does the proxy)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import BrokerContext, Connection
from shareproxy.kafka.routes import ROUTES, Route, Split, Via, refusal
from shareproxy.logs import RateLimit
from shareproxy.protocol.api_keys import ApiKey, CoordinatorType, api_name
from shareproxy.protocol.codec import RawResponse, Request, reader_for, response_type
from shareproxy.protocol.error_response import error_entity, list_entry_type
from shareproxy.upstream.client import UpstreamError
from shareproxy.upstream.link import UpstreamLink

log = logging.getLogger(__name__)
log.addFilter(RateLimit())

_KEY_TYPE = {Via.GROUP: CoordinatorType.GROUP, Via.TRANSACTION: CoordinatorType.TRANSACTION}
# answers that mean "ask the coordinator again": the proxy forgets where it was
_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}


async def handle(ctx: BrokerContext, conn: Connection, request: Request) -> Any:
    route = ROUTES[ApiKey(request.api_key)]
    body = request.body
    if route.split is not None and hasattr(body, route.split.items):
        return await split(ctx, conn, request, route, route.split)  # checked item by item
    refused = refusal(
        lambda op, rt, name, audit=True: ctx.allowed(conn, op, rt, name, audit=audit),
        route,
        body,
    )
    if refused is None and request.api_key == ApiKey.INIT_PRODUCER_ID:
        refused = _idempotence_refused(ctx, conn, body)
    if refused is not None:
        return _answer_error(request, route, *refused)
    if route.checked is not None:
        items, results, check = route.checked
        problems = check(body)
        if problems:
            return await _partly_refused(ctx, conn, request, route, items, results, problems)
    key = route.key(body)
    if conn.link is None:
        conn.link = UpstreamLink(ctx.upstream)
    try:
        node = await _destination(ctx, route, key)
        answer = await conn.link.relay(node, request)
    except UpstreamError as e:
        log.warning("%s: %s", api_name(request.api_key), e)
        code = e.error_code
        if route.via in _KEY_TYPE and key is not None:
            _moved(ctx, route, key)
            if code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,):
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return _answer_error(request, route, code, str(e))
    if route.via in _KEY_TYPE and key is not None and _error_codes(answer) & _MOVED:
        _moved(ctx, route, key)
    return answer


def _idempotence_refused(ctx: BrokerContext, conn: Connection, body: Any) -> tuple[int, str] | None:
    """InitProducerId without a transactional id starts an idempotent producer: Kafka asks
    for IdempotentWrite on the cluster, or Write on any topic."""
    if body.transactional_id:
        return None
    if ctx.allowed(
        conn, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False
    ) or ctx.allowed_any(conn, Operation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized to produce idempotently"


async def _destination(ctx: BrokerContext, route: Route, key: str | None) -> int:
    if route.via in _KEY_TYPE and key:
        assert ctx.coordinators is not None, "the proxy wires the upstream coordinators"
        return await ctx.coordinators.node_for(_KEY_TYPE[route.via], key)
    if route.via is Via.CONTROLLER and ctx.upstream.controller_id >= 0:
        return ctx.upstream.controller_id
    return await ctx.upstream.any_node()


def _moved(ctx: BrokerContext, route: Route, key: str) -> None:
    if ctx.coordinators is not None:
        ctx.coordinators.moved(_KEY_TYPE[route.via], key)


def _answer_error(request: Request, route: Route, code: int, message: str) -> Any:
    cls = response_type(request.api_key, request.api_version)
    return error_entity(cls, code, message, request.body, route.mirror)


def _error_codes(answer: RawResponse) -> set[int]:
    """Every error code in a (small) coordinator answer, read to see whether it moved."""
    cls = response_type(answer.api_key, answer.api_version)
    try:
        body, _ = reader_for(cls)(bytes(answer.body), 0)
    except Exception:  # not ours to judge: the client reads it
        return set()
    found: set[int] = set()
    _collect(body, found)
    return found


def _collect(entity: Any, found: set[int]) -> None:
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            found.add(int(value))
        elif dataclasses.is_dataclass(value):
            _collect(value, found)
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                _collect(item, found)


async def split(
    ctx: BrokerContext, conn: Connection, request: Request, route: Route, split: Split
) -> Any:
    """A request for several groups (or transactional ids): each checked on its own, and
    sent to its own coordinator; one coordinator for all is one relayed request."""
    body = request.body
    cls = response_type(request.api_key, request.api_version)
    entry_cls = list_entry_type(cls, split.results)
    answered: dict[int, Any] = {}  # position in the request -> response entry
    by_node: dict[int, list[tuple[int, Any]]] = {}
    for i, item in enumerate(getattr(body, split.items)):
        key = split.key(item)
        one = dataclasses.replace(body, **{split.items: (item,)})
        refused = refusal(
            lambda op, rt, name, audit=True: ctx.allowed(conn, op, rt, name, audit=audit),
            route,
            one,
        )
        if refused is None:
            try:
                by_node.setdefault(await _destination(ctx, route, key), []).append((i, item))
                continue
            except UpstreamError as e:
                _moved(ctx, route, key)
                refused = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)
        answered[i] = _entry(entry_cls, split, item, *refused)
    if conn.link is None:
        conn.link = UpstreamLink(ctx.upstream)
    if len(by_node) == 1 and not answered and request.raw_body:  # the common case: as it came
        ((node, items),) = by_node.items()
        try:
            return await conn.link.relay(node, request)
        except UpstreamError as e:  # answered item by item below, as when sent decoded
            _gone(ctx, route, split, entry_cls, items, e, answered)
            by_node = {}
    for node, items in by_node.items():
        asked = dataclasses.replace(body, **{split.items: tuple(item for _, item in items)})
        try:
            got = getattr(await conn.link.send(node, asked), split.results)
        except UpstreamError as e:
            _gone(ctx, route, split, entry_cls, items, e, answered)
            continue
        for (i, _), entry in zip(items, got, strict=False):
            answered[i] = entry
    entries = tuple(answered[i] for i in sorted(answered))
    return dataclasses.replace(error_entity(cls, ErrorCode.NONE, None), **{split.results: entries})


def _gone(
    ctx: BrokerContext,
    route: Route,
    split: Split,
    entry_cls: type,
    items: list[tuple[int, Any]],
    error: UpstreamError,
    answered: dict[int, Any],
) -> None:
    """The coordinator could not be reached: each of its items answers the retriable
    COORDINATOR_NOT_AVAILABLE, and is looked up again next time."""
    for i, item in items:
        _moved(ctx, route, split.key(item))
        answered[i] = _entry(
            entry_cls, split, item, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)
        )


def _entry(entry_cls: type, split: Split, item: Any, code: int, message: str) -> Any:
    """One refused item's answer, named as the request named it."""
    source = None if isinstance(item, str) else item
    entry = error_entity(entry_cls, code, message, source)
    return dataclasses.replace(entry, **{split.result_key: split.key(item)})


async def _partly_refused(
    ctx: BrokerContext,
    conn: Connection,
    request: Request,
    route: Route,
    items: str,
    results: str,
    problems: dict[int, tuple[int, str]],
) -> Any:
    """Entries Kafka would refuse are answered here; the others go upstream, decoded."""
    body = request.body
    cls = response_type(request.api_key, request.api_version)
    entry_cls = list_entry_type(cls, results)
    asked = getattr(body, items)
    answered = {i: error_entity(entry_cls, *problems[i], asked[i]) for i in problems}
    rest = [(i, item) for i, item in enumerate(asked) if i not in problems]
    if rest:
        if conn.link is None:
            conn.link = UpstreamLink(ctx.upstream)
        sent = dataclasses.replace(body, **{items: tuple(item for _, item in rest)})
        try:
            node = await _destination(ctx, route, None)
            got = getattr(await conn.link.send(node, sent), results)
        except UpstreamError as e:
            got = [error_entity(entry_cls, e.error_code, str(e), item) for _, item in rest]
        for (i, _), entry in zip(rest, got, strict=False):
            answered[i] = entry
    entries = tuple(answered[i] for i in sorted(answered))
    return dataclasses.replace(error_entity(cls, ErrorCode.NONE, None), **{results: entries})
