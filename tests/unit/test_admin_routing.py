"""Each REST route declares what its caller needs and where it is answered as one dependency:
a refused caller is answered where it arrives, an allowed one by the node that answers, whose
answer comes back as it is; a route's body runs only there."""

from __future__ import annotations

import json

import pytest
from fastapi import Response
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from shareproxy.admin import answering
from shareproxy.admin.forwarding import FORWARDED_HEADER
from shareproxy.core.acl import Operation, ResourceType
from tests.support.admin_app import Directory, Grants, Places, admin_app, admin_nodes

GROUP = ResourceType.GROUP


async def test_a_refused_caller_is_answered_where_it_arrives():
    async with admin_nodes() as n:
        n.places.coordinators["g"] = n.there
        refused = await n.call("DELETE", "/v1/share-groups/g")
        assert refused.status_code == 403, refused.text
        assert refused.json()["error_code"] == "GROUP_AUTHORIZATION_FAILED"
        assert (await n.call("DELETE", "/v1/share-groups/g", user=None)).status_code == 401
        assert n.other.received == [] and n.places.deleted == []


async def test_a_call_about_a_group_coordinated_elsewhere_is_answered_there_unchanged():
    async with admin_nodes() as n:
        n.places.coordinators["team/orders"] = n.there
        n.grants.grant("alice", Operation.DELETE, GROUP, "team/orders")
        body = {"error_code": "NON_EMPTY_GROUP", "message": "it has members"}
        n.other.answer = Response(
            json.dumps(body),
            409,
            headers={"retry-after": "1", "x-not-passed-back": "1"},
            media_type="application/json",
        )
        answer = await n.call("DELETE", "/v1/share-groups/team%2Forders")
        assert (answer.status_code, answer.json()) == (409, body)
        assert answer.headers["retry-after"] == "1"
        assert "x-not-passed-back" not in answer.headers
        assert n.places.deleted == []  # the body ran there, not here
        (sent,) = n.other.received
        assert (sent.method, sent.path) == ("DELETE", "/v1/share-groups/team%2Forders")
        assert sent.headers["authorization"] == "Bearer alice"
        assert sent.headers[FORWARDED_HEADER] == "1"


async def test_a_group_coordinated_here_is_answered_here():
    async with admin_nodes() as n:
        n.grants.grant("alice", Operation.DELETE, GROUP, "g")
        assert (await n.call("DELETE", "/v1/share-groups/g")).status_code == 204
        assert n.places.deleted == ["g"] and n.other.received == []


async def test_a_call_passed_on_once_is_not_passed_on_again():
    async with admin_nodes() as n:
        n.places.coordinators["g"] = n.there
        n.grants.grant("alice", Operation.DELETE, GROUP, "g")
        looped = await n.call("DELETE", "/v1/share-groups/g", headers={FORWARDED_HEADER: "1"})
        assert looped.status_code == 421, looped.text
        assert looped.json()["error_code"] == "NOT_COORDINATOR"
        assert n.other.received == []


async def test_a_partition_call_needs_the_group_then_the_topic_and_goes_to_the_leader():
    async with admin_nodes() as n:
        n.places.leaders[("t", 0)] = n.there
        path = "/v1/share-groups/g/partitions/t/0/records"
        n.grants.grant("alice", Operation.DESCRIBE, GROUP, "g")
        refused = await n.call("GET", path)
        assert refused.json()["error_code"] == "TOPIC_AUTHORIZATION_FAILED"
        n.grants.grant("alice", Operation.DESCRIBE, ResourceType.TOPIC, "t")
        n.other.answer = Response('{"records": []}', 200, media_type="application/json")
        answer = await n.call("GET", f"{path}?limit=5")
        assert (answer.status_code, answer.json()) == (200, {"records": []})
        (sent,) = n.other.received
        assert sent.path == path


async def test_the_calls_passed_on_share_one_client_and_its_connections():
    async with admin_nodes() as n:
        n.places.coordinators["g"] = n.there
        n.grants.grant("alice", Operation.DELETE, GROUP, "g")
        for _ in range(3):
            assert (await n.call("DELETE", "/v1/share-groups/g")).status_code == 204
        assert len({sent.port for sent in n.other.received}) == 1, n.other.received


@pytest.fixture(scope="module")
def routes() -> list[tuple[str, APIRoute]]:
    app = admin_app(Places(), Grants(), Directory())
    return [
        (f"{sorted(route.methods)} {path}", route)
        for path, route in _api_routes(app.routes)
        if path.startswith("/v1/")
    ]


def _api_routes(routes: list[BaseRoute]) -> list[tuple[str, APIRoute]]:
    """Every API route with its full path: older FastAPI copies an included router's routes
    into the app's own, newer keeps the routers and walks them with their contexts."""
    try:
        from fastapi.routing import iter_route_contexts  # type: ignore[attr-defined]
    except ImportError:
        return [(r.path, r) for r in routes if isinstance(r, APIRoute)]
    return [
        (c.path or "", c.original_route)
        for c in iter_route_contexts(routes)
        if isinstance(c.original_route, APIRoute)
    ]


def test_every_api_route_declares_what_its_caller_needs_and_where_it_is_answered(routes):
    declared = {
        name: [
            d.call
            for d in route.dependant.dependencies
            if getattr(d.call, "__module__", None) == answering.__name__
        ]
        for name, route in routes
    }
    assert len(declared) > 20, sorted(declared)
    assert all(len(d) == 1 for d in declared.values()), declared
