"""REST resource for a share group's push (beyond KIP-932): ``PUT`` sets it (201 when the group
had none, 200 on a change), ``GET`` shows it with its status summed over the nodes (each pushes
the share-partitions it leads), ``DELETE`` stops it. Setting one needs Alter on the group and
Read on each topic; its URL must be under a prefix the node's ``--push-allowed-urls`` lists
(POLICY_VIOLATION otherwise). The authorization is never shown back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field

from shareproxy.admin.answering import GroupCall, GroupGathering, every_node, this_node
from shareproxy.admin.params import Exact, TopicName
from shareproxy.core import group_config
from shareproxy.core import push_spec as ps
from shareproxy.core.acl import Operation
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.push_outcome import PushOutcome
from shareproxy.runtime.consuming import ShareConsumers
from shareproxy.runtime.groups import GroupAdmin
from shareproxy.settings.push_targets import PushTargetError, PushTargets

Ordered = Literal["none", "key"]
# this node's part of a group's push status (None: it runs none for the group)
StatusOf = Callable[[str], dict[str, Any] | None]


class PushChange(Exact):
    url: str = Field(min_length=1, max_length=2048)
    topics: list[TopicName] = Field(min_length=1, max_length=ps.MAX_TOPICS)
    max_in_flight: int = Field(
        default=ps.DEFAULT_MAX_IN_FLIGHT, ge=ps.MAX_IN_FLIGHT[0], le=ps.MAX_IN_FLIGHT[1]
    )
    timeout_ms: int = Field(
        default=ps.DEFAULT_TIMEOUT_MS,
        ge=ps.TIMEOUT_MS[0],
        le=ps.TIMEOUT_MS[1],
        description="a request's time-out; it always ends before the record's acquisition lock",
    )
    ordered: Ordered | None = Field(
        default=None,
        description="key: at most one record of a key in flight, in offset order (sets the "
        f"group's {group_config.KEY_ORDERING}); none: unordered; absent: as the group is",
    )
    authorization: str | None = Field(
        default=None,
        max_length=ps.MAX_AUTHORIZATION_CHARS,
        description="the Authorization header sent with every push: kept, never shown back",
    )


class Pushed(BaseModel):
    at_ms: int
    topic: str
    partition: int
    offset: int
    delivery_count: int
    status: int | None = Field(description="the endpoint's HTTP status (null: no answer)")
    outcome: str
    took_ms: int


class PushStatusView(BaseModel):
    outcomes: dict[str, int] = Field(
        description="records by outcome since each node started: accepted, released, "
        "rejected, timed_out"
    )
    in_flight: int
    endpoint: Literal["up", "down"]
    endpoint_down_since_ms: int | None
    last_failure_status: int | None
    problems: list[str] = Field(description="why a node cannot push now")
    recent: list[Pushed] = Field(description="the last answers, newest last")


class PushView(BaseModel):
    group_id: str
    url: str
    topics: list[str]
    max_in_flight: int
    timeout_ms: int
    ordered: Ordered
    authorization: Literal["set"] | None = Field(description="whether one is set (never shown)")
    status: PushStatusView
    unreached: list[str] = Field(
        default_factory=list, description="nodes that could not be asked (not counted)"
    )


def _summed(parts: list[dict[str, Any]]) -> PushStatusView:
    outcomes = {o.value: 0 for o in PushOutcome}
    down = [p["endpoint_down_since_ms"] for p in parts if p["endpoint_down_since_ms"] is not None]
    failures = [p["last_failure_status"] for p in parts if p["last_failure_status"] is not None]
    recent = sorted((r for p in parts for r in p["recent"]), key=lambda r: r["at_ms"])
    for p in parts:
        for name, n in p["outcomes"].items():
            outcomes[name] = outcomes.get(name, 0) + n
    return PushStatusView(
        outcomes=outcomes,
        in_flight=sum(p["in_flight"] for p in parts),
        endpoint="down" if down else "up",
        endpoint_down_since_ms=min(down) if down else None,
        last_failure_status=failures[-1] if failures else None,
        problems=sorted({p["problem"] for p in parts if p["problem"]}),
        recent=[Pushed.model_validate(r) for r in recent[-20:]],
    )


def _parts(view: PushView) -> dict[str, Any]:
    """A node's answer back in the form ``_summed`` takes."""
    s = view.status
    return {
        "outcomes": s.outcomes,
        "in_flight": s.in_flight,
        "endpoint_down_since_ms": s.endpoint_down_since_ms,
        "last_failure_status": s.last_failure_status,
        "problem": "; ".join(s.problems) or None,
        "recent": [r.model_dump() for r in s.recent],
    }


def router(
    admin: GroupAdmin, consumers: ShareConsumers, targets: PushTargets, status_of: StatusOf
) -> APIRouter:
    r = APIRouter(prefix="/v1/share-groups", tags=["push delivery"])

    def view(group_id: str, spec: ps.PushSpec, parts: list[dict[str, Any]]) -> PushView:
        shown = spec.shown()
        ordered: Ordered = "key" if admin.settings_for(group_id).key_ordering else "none"
        return PushView(group_id=group_id, ordered=ordered, status=_summed(parts), **shown)

    async def stored(group_id: str) -> ps.PushSpec:
        spec = await admin.pushes.show(group_id)
        if spec is None:
            raise ShareError(ErrorCode.RESOURCE_NOT_FOUND, f"share group {group_id!r} has no push")
        return spec

    @r.put("/{group_id:name}/push", response_model=PushView)
    async def put_push(
        call: Annotated[GroupCall, Depends(this_node(Operation.ALTER))],
        change: PushChange,
        response: Response,
    ) -> PushView:
        """Set the group's push; it starts on every node within a second."""
        call.caller.require_topics(Operation.READ, change.topics)
        try:
            targets.check(change.url)
        except PushTargetError as exc:
            raise ShareError(ErrorCode.POLICY_VIOLATION, str(exc)) from None
        try:
            spec = ps.PushSpec(
                change.url,
                tuple(change.topics),
                change.max_in_flight,
                change.timeout_ms,
                change.authorization,
            )
        except ps.PushSpecError as exc:
            raise ShareError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        await consumers.named(spec.topics)  # UNKNOWN_TOPIC_OR_PARTITION for one not there
        if change.ordered is not None:
            enabled = "true" if change.ordered == "key" else "false"
            await admin.alter_configs(call.group_id, {group_config.KEY_ORDERING: enabled})
        created = await admin.pushes.set(call.group_id, spec)
        response.status_code = 201 if created else 200
        return view(call.group_id, spec, [])

    @r.get("/{group_id:name}/push", response_model=PushView)
    async def get_push(
        call: Annotated[GroupGathering, Depends(every_node(Operation.DESCRIBE))],
    ) -> PushView:
        """The push and its status: outcomes since each node started, the endpoint's health
        and the last answers, over every live node."""
        spec = await stored(call.group_id)
        mine = status_of(call.group_id)
        others, unreached = await call.others.answers(PushView.model_validate)
        parts = ([mine] if mine is not None else []) + [_parts(v) for v in others]
        shown = view(call.group_id, spec, parts)
        shown.unreached = unreached
        return shown

    @r.delete("/{group_id:name}/push", status_code=204)
    async def delete_push(
        call: Annotated[GroupCall, Depends(this_node(Operation.ALTER))],
    ) -> Response:
        """Stop the push on every node (within a second); its records in flight are released."""
        if not await admin.pushes.remove(call.group_id):
            raise ShareError(
                ErrorCode.RESOURCE_NOT_FOUND, f"share group {call.group_id!r} has no push"
            )
        return Response(status_code=204)

    return r
