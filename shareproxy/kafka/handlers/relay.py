"""Every API in ``kafka/routes.py``: checked against the principal's ACLs, then relayed to the
upstream coordinator or controller as the client encoded it (only the correlation id changes),
and the answer relayed back unchanged. The client never sees an upstream address: it asked the
proxy for its coordinator and was told the proxy.

Upstream trouble answers with the retriable error Kafka's own broker would give: a coordinator
that cannot be reached or has moved is COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR (the client
looks it up again, and so does the proxy)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import RelayContext
from shareproxy.kafka.responses import KioEntity
from shareproxy.kafka.routes import (
    ROUTES,
    Allowed,
    Route,
    Split,
    Via,
    entry_refusals,
    refusal,
    visible,
)
from shareproxy.protocol.api_keys import ApiKey, CoordinatorType, api_name
from shareproxy.protocol.codec import RawResponse, Request, reader_for, response_type
from shareproxy.protocol.error_response import error_entity, list_entry_type
from shareproxy.protocol.forward_rules import relay_problem
from shareproxy.telemetry.logs import RateLimit
from shareproxy.upstream.client import UpstreamError

log = logging.getLogger(__name__)
log.addFilter(RateLimit())

_KEY_TYPE = {Via.GROUP: CoordinatorType.GROUP, Via.TRANSACTION: CoordinatorType.TRANSACTION}
# answers that mean "ask the coordinator again": the proxy forgets where it was
_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_UNREADABLE = "the upstream broker's answer does not follow the API's schema"
_NAME_OR_ID = "a topic is named by its name or by its id, one of the two"


async def handle(ctx: RelayContext, conn: Connection, request: Request) -> RawResponse | KioEntity:
    route = ROUTES[ApiKey(request.api_key)]
    body = request.body
    allowed = allowed_for(ctx, conn)
    if route.split is not None and hasattr(body, route.split.items):
        return await split(ctx, conn, request, route, route.split)  # checked item by item
    refused = refusal(allowed, route, body)
    if refused is None and request.api_key == ApiKey.INIT_PRODUCER_ID:
        refused = _idempotence_refused(ctx, conn, body)
    if refused is None:  # authorization answers first, as in Kafka
        refused = relay_problem(request.api_key, body)
    if refused is not None:
        return answer_error(request, route, *refused)
    named, unknown = await _named_by_id(ctx, route, body)
    problems = {**unknown, **entry_refusals(allowed, route, named)}
    if route.checked is not None:  # authorization answers first, as in Kafka
        problems = {**route.checked(body), **problems}
    if problems:
        return await partly_refused(ctx, conn, request, route, problems)
    key = route.key(body)
    try:
        node = await _destination(ctx, route, key)
        answer = await ctx.link(conn).relay(node, request)
    except UpstreamError as e:
        return answer_error(request, route, _failed(ctx, request, route, key, e), str(e))
    read = _decoded(answer)  # small answers: read before they are passed on
    if read is None:
        return _unreadable(request, route)
    if route.via in _KEY_TYPE and key is not None and _error_codes(read) & _MOVED:
        _moved(ctx, route, key)
    if _asks_all(route, body):
        return _hidden(allowed, route, request, read)
    return answer


async def _named_by_id(
    ctx: RelayContext, route: Route, body: Any
) -> tuple[Any, dict[int, tuple[int, str]]]:
    """``body`` as authorization reads it: entries that name their topic by id alone carry
    the name the id has now (what is sent upstream is unchanged); an id no topic has is
    answered UNKNOWN_TOPIC_ID, as Kafka answers it."""
    entries = route.entries
    items = entries.of(body) if entries is not None and entries.by_id else None
    if not items:
        return body, {}
    asked = getattr(body, items)
    if not asked or all(isinstance(e, str) for e in asked):
        return body, {}
    named: list[Any] = []
    problems: dict[int, tuple[int, str]] = {}
    for i, e in enumerate(asked):  # one of name and id, as Kafka's controller requires
        if (e.name is None) == (e.topic_id is None):
            problems[i] = ErrorCode.INVALID_REQUEST, _NAME_OR_ID
    if all(e.name is not None or e.topic_id is None for e in asked):
        return body, problems
    ids = [e.topic_id for e in asked if e.name is None and e.topic_id is not None]
    if any(ctx.topic_name(topic_id) is None for topic_id in ids):
        with contextlib.suppress(UpstreamError):  # what is unknown then stays unknown
            await ctx.refresh_metadata()
    for i, e in enumerate(asked):
        if e.name is None and e.topic_id is not None:
            name = ctx.topic_name(e.topic_id)
            if name is None:
                problems[i] = ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has the id {e.topic_id}"
            else:
                e = dataclasses.replace(e, name=name)
        named.append(e)
    return dataclasses.replace(body, **{items: tuple(named)}), problems


def allowed_for(ctx: RelayContext, conn: Connection) -> Allowed:
    """The connection principal's permission check, as the routes' rules ask it."""
    return lambda op, rt, name, audit=True: ctx.allowed(conn, op, rt, name, audit=audit)


def _failed(
    ctx: RelayContext, request: Request, route: Route, key: str | None, e: UpstreamError
) -> int:
    """The retriable code a request that could not reach the upstream answers: a coordinator
    is looked up again next time."""
    log.warning("%s: %s", api_name(request.api_key), e)
    code = e.code
    if route.via in _KEY_TYPE and key is not None:
        _moved(ctx, route, key)
        if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


def _asks_all(route: Route, entity: Any) -> bool:
    """A null list of a hiding route asks for every entry (OffsetFetch of all topics)."""
    entries = route.entries
    items = entries.of(entity) if entries is not None and entries.hide else None
    return items is not None and getattr(entity, items) is None


def _hidden(allowed: Allowed, route: Route, request: Request, answer: Any) -> KioEntity:
    """The answer without the entries the principal may not see; an answer that cannot be
    read is not passed on unread."""
    assert route.entries is not None
    if answer is None:
        return _unreadable(request, route)
    results = route.entries.results
    kept = tuple(e for e in getattr(answer, results) if visible(allowed, route, e))
    return dataclasses.replace(answer, **{results: kept})


def _idempotence_refused(ctx: RelayContext, conn: Connection, body: Any) -> tuple[int, str] | None:
    """InitProducerId without a transactional id starts an idempotent producer: Kafka asks
    for IdempotentWrite on the cluster, or Write on any topic."""
    if body.transactional_id:
        return None
    if ctx.allowed(
        conn, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, audit=False
    ) or ctx.allowed_any(conn, Operation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized to produce idempotently"


async def _destination(ctx: RelayContext, route: Route, key: str | None) -> int:
    if route.via in _KEY_TYPE and key:
        return await ctx.coordinator_node(_KEY_TYPE[route.via], key)
    if route.via is Via.CONTROLLER and ctx.upstream_controller >= 0:
        return ctx.upstream_controller
    return await ctx.any_upstream_node()


def _moved(ctx: RelayContext, route: Route, key: str) -> None:
    ctx.coordinator_moved(_KEY_TYPE[route.via], key)


def answer_error(request: Request, route: Route, code: int, message: str) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    return error_entity(cls, code, message, request.body, route.mirror)


def _unreadable(request: Request, route: Route) -> KioEntity:
    """An upstream answer the proxy cannot read: the client could not read it either and
    would lose its connection, so it gets a readable error instead."""
    log.warning("%s: %s", api_name(request.api_key), _UNREADABLE)
    return answer_error(request, route, ErrorCode.UNKNOWN_SERVER_ERROR, _UNREADABLE)


def _decoded(answer: RawResponse) -> KioEntity | None:
    """A relayed answer read; None where it cannot be read (not ours to judge: the client
    reads it)."""
    cls = response_type(answer.api_key, answer.api_version)
    try:
        return reader_for(cls)(bytes(answer.body), 0)[0]
    except Exception:
        return None


def _error_codes(answer: Any) -> set[int]:
    """Every error code in a (small) coordinator answer, read to see whether it moved."""
    found: set[int] = set()
    _collect(answer, found)
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
    ctx: RelayContext,
    conn: Connection,
    request: Request,
    route: Route,
    split: Split,
    own: Callable[[Any], KioEntity | None] | None = None,
) -> RawResponse | KioEntity:
    """A request for several groups (or transactional ids): each checked on its own, and
    sent to its own coordinator; one coordinator for all is one relayed request. Within a
    group, topics are checked one by one (OffsetFetch v8+). ``own`` answers an item the proxy
    answers itself once its permissions are checked (a share group's), or None."""
    body = request.body
    allowed = allowed_for(ctx, conn)
    cls = response_type(request.api_key, request.api_version)
    entry_cls = list_entry_type(cls, split.results)
    answered: dict[int, Any] = {}  # position in the request -> response entry
    by_node: dict[int, list[tuple[int, Any]]] = {}
    within: dict[int, tuple[Any, dict[int, tuple[int, str]]]] = {}  # refused topics of an item
    for i, item in enumerate(getattr(body, split.items)):
        key = split.key(item)
        refused = refusal(allowed, route, dataclasses.replace(body, **{split.items: (item,)}))
        if refused is None:
            problems = entry_refusals(allowed, route, item)
            if problems:
                within[i] = item, problems
                item = _without(route, item, problems)
                if not getattr(item, _items(route, item)):
                    answered[i] = _entry(entry_cls, split, item, ErrorCode.NONE, None)
                    continue
            mine = own(item) if own is not None else None
            if mine is not None:
                answered[i] = mine
                continue
            try:
                by_node.setdefault(await _destination(ctx, route, key), []).append((i, item))
                continue
            except UpstreamError as e:
                _moved(ctx, route, key)
                refused = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)
        answered[i] = _entry(entry_cls, split, item, *refused)
    link = ctx.link(conn)
    hiding = any(_asks_all(route, item) for item in getattr(body, split.items))
    as_it_came = not answered and not within and not hiding and request.raw_body
    if len(by_node) == 1 and as_it_came:  # the common case: relayed as bytes
        ((node, items),) = by_node.items()
        try:
            answer = await link.relay(node, request)
            return answer if _decoded(answer) is not None else _unreadable(request, route)
        except UpstreamError as e:  # answered item by item below, as when sent decoded
            _gone(ctx, route, split, entry_cls, items, e, answered)
            by_node = {}
    for node, items in by_node.items():
        asked = dataclasses.replace(body, **{split.items: tuple(item for _, item in items)})
        try:
            got = getattr(await link.send(node, asked), split.results)
        except UpstreamError as e:
            _gone(ctx, route, split, entry_cls, items, e, answered)
            continue
        by_key = {getattr(entry, split.result_key): entry for entry in got}
        for i, item in items:  # matched by id: an upstream may answer in another order
            entry = by_key.get(split.key(item))
            if entry is None:
                why = "the coordinator's answer left it out"
                entry = _entry(entry_cls, split, item, ErrorCode.COORDINATOR_NOT_AVAILABLE, why)
            answered[i] = (
                _hidden(allowed, route, request, entry) if _asks_all(route, item) else entry
            )
    for i, (item, problems) in within.items():  # the refused topics join their group's answer
        answered[i] = _joined(route, answered[i], item, problems)
    entries = tuple(answered[i] for i in sorted(answered))
    return dataclasses.replace(error_entity(cls, ErrorCode.NONE, None), **{split.results: entries})


def _gone(
    ctx: RelayContext,
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


def _entry(entry_cls: type, split: Split, item: Any, code: int, message: str | None) -> KioEntity:
    """One refused item's answer, named as the request named it."""
    source = None if isinstance(item, str) else item
    entry = error_entity(entry_cls, code, message, source)
    return dataclasses.replace(entry, **{split.result_key: split.key(item)})


def _items(route: Route, entity: Any) -> str:
    assert route.entries is not None
    items = route.entries.of(entity)
    assert items is not None, "entry refusals come from a list the entity has"
    return items


def _without(route: Route, entity: Any, problems: dict[int, tuple[int, str]]) -> KioEntity:
    """``entity`` with its refused entries taken out: what goes upstream."""
    items = _items(route, entity)
    kept = tuple(e for i, e in enumerate(getattr(entity, items)) if i not in problems)
    return dataclasses.replace(entity, **{items: kept})


def _refused_entry(entry_cls: type, route: Route, item: Any, code: int, message: str) -> KioEntity:
    """A refused entry's answer, mirroring the request's entry (a bare name: by name)."""
    entries = route.entries
    assert entries is not None
    aliases = {**(route.mirror or {}), **entries.aliases}
    if isinstance(item, str):
        entry = error_entity(entry_cls, code, message, None, aliases, entries.refused)
        return dataclasses.replace(entry, **{entries.result_name: item})
    return error_entity(entry_cls, code, message, item, aliases, entries.refused)


def _joined(
    route: Route, result: Any, item: Any, problems: dict[int, tuple[int, str]]
) -> KioEntity:
    """A group's answer with its refused topics added."""
    assert route.entries is not None
    results = route.entries.results
    entry_cls = list_entry_type(type(result), results)
    asked = getattr(item, _items(route, item))
    refused = tuple(_refused_entry(entry_cls, route, asked[i], *problems[i]) for i in problems)
    return dataclasses.replace(result, **{results: refused + tuple(getattr(result, results))})


async def partly_refused(
    ctx: RelayContext,
    conn: Connection,
    request: Request,
    route: Route,
    problems: dict[int, tuple[int, str]],
) -> KioEntity:
    """Refused entries are answered here and the others carried out upstream (decoded), as
    ``KafkaApis`` carries out the authorized part of a request; the answers are joined."""
    body = request.body
    assert route.entries is not None
    items, results = _items(route, body), route.entries.results
    cls = response_type(request.api_key, request.api_version)
    entry_cls = list_entry_type(cls, results)
    asked = getattr(body, items)
    answered = {i: _refused_entry(entry_cls, route, asked[i], *problems[i]) for i in problems}
    rest = [(i, item) for i, item in enumerate(asked) if i not in problems]
    if route.entries.all_or_nothing:
        why = "not attempted: another entry of the request was refused"
        for i, item in rest:
            answered[i] = _refused_entry(
                entry_cls, route, item, ErrorCode.OPERATION_NOT_ATTEMPTED, why
            )
        rest = []
    base = error_entity(cls, ErrorCode.NONE, None)
    got: list[Any] = []
    if rest:
        key = route.key(body)
        sent = dataclasses.replace(body, **{items: tuple(item for _, item in rest)})
        try:
            base = await ctx.link(conn).send(await _destination(ctx, route, key), sent)
            got = list(getattr(base, results))
        except UpstreamError as e:
            code = _failed(ctx, request, route, key, e)
            got = [_refused_entry(entry_cls, route, item, code, str(e)) for _, item in rest]
        else:
            if route.via in _KEY_TYPE and key is not None and _error_codes(base) & _MOVED:
                _moved(ctx, route, key)
    if len(got) == len(rest):  # in the request's order
        answered.update((i, entry) for (i, _), entry in zip(rest, got, strict=True))
        got = []
    entries = tuple(answered[i] for i in sorted(answered)) + tuple(got)
    return dataclasses.replace(base, **{results: entries})
