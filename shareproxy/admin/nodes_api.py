"""REST resource for the cluster's proxy nodes: each live node's id, listeners, admin API,
lease and how many share groups it coordinates and share-partitions it leads. Any
authenticated caller may list them, as any client may list Kafka's brokers (DescribeCluster
asks for no ACL); each node answers its own counts, so the others are asked too."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from shareproxy.admin.answering import Gathering, anyone_every_node
from shareproxy.runtime.directory import NodeDirectory, NodeView


class Node(BaseModel):
    node_id: int
    listeners: dict[str, str] = Field(description="security protocol → advertised host:port")
    admin_url: str | None = Field(description="where its admin API answers (null: none)")
    lease_live: bool = Field(description="its lease holds (by its own reckoning for itself)")
    lease_expires_at: datetime | None = Field(description="by the store's clock")
    groups_coordinated: int | None = Field(description="null: the node could not be asked")
    share_partitions_led: int | None = Field(description="share-partitions it has loaded")


class Nodes(BaseModel):
    node_id: int = Field(description="the node that answered")
    nodes: list[Node]
    unreached: list[str] = Field(
        default_factory=list, description="nodes that could not be asked (their counts are null)"
    )


def router(directory: NodeDirectory) -> APIRouter:
    r = APIRouter(prefix="/v1/nodes", tags=["nodes"])

    @r.get("", response_model=Nodes)
    async def nodes(call: Annotated[Gathering, Depends(anyone_every_node)]) -> Nodes:
        """The live nodes as this node last read them from the store, with each node's own
        counts (a call passed on from another node answers only this node's row)."""
        if call.others.passed_on:
            return Nodes(node_id=directory.node_id, nodes=[_node(directory.this_node())])
        rows = {v.node_id: _node(v) for v in directory.live()}
        others, unreached = await call.others.answers(Nodes.model_validate)
        for answer in others:
            own = next((n for n in answer.nodes if n.node_id == answer.node_id), None)
            if own is not None and own.node_id in rows:
                rows[own.node_id] = own
        return Nodes(
            node_id=directory.node_id, nodes=[rows[i] for i in sorted(rows)], unreached=unreached
        )

    return r


def _node(v: NodeView) -> Node:
    return Node.model_validate(v, from_attributes=True)
