"""A group id may hold any character but NUL, '/' and '%' included: the REST API routes on the
path as the client encoded it, and each name parameter is the name exactly as meant."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from shareproxy.admin import path_names
from shareproxy.admin.path_names import RawSegments, routed_path
from shareproxy.cli.admin_client import seg

NAMES = ["orders", "team/orders", "a%2Fb", "100%", "a?b#c d", "ü/é", "/", "%", ".", "..", "a+b"]


def _app() -> FastAPI:
    app = FastAPI()
    app.add_middleware(RawSegments)

    @app.get("/v1/share-groups/{group_id:name}")
    async def group(group_id: str) -> dict[str, str]:
        return {"group": group_id}

    @app.get("/v1/share-groups/{group_id:name}/config")
    async def config(group_id: str) -> dict[str, str]:
        return {"config of": group_id}

    @app.post("/v1/share-groups/{group_id:name}/members/{member_id:name_to_end}/release")
    async def release(group_id: str, member_id: str) -> dict[str, str]:
        return {"group": group_id, "member": member_id}

    return app


@pytest.fixture
async def http():
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
        yield client


@pytest.mark.parametrize("name", NAMES)
async def test_a_name_as_the_cli_encodes_it_reaches_its_route_whole(http, name):
    assert (await http.get(f"/v1/share-groups/{seg(name)}")).json() == {"group": name}
    assert (await http.get(f"/v1/share-groups/{seg(name)}/config")).json() == {"config of": name}


async def test_a_member_id_in_standard_base64_arrives_encoded_or_not(http):
    member = "q/Xz+w=="
    for sent in (quote(member, safe=""), member):
        answer = await http.post(f"/v1/share-groups/team%2Forders/members/{sent}/release")
        assert answer.json() == {"group": "team/orders", "member": member}


async def test_an_empty_member_id_reaches_the_route_that_checks_it(http):
    answer = await http.post("/v1/share-groups/g/members//release")
    assert answer.json() == {"group": "g", "member": ""}


async def test_an_unencoded_slash_still_separates_segments(http):
    assert (await http.get("/v1/share-groups/team/orders")).status_code == 404


def test_routing_sees_each_segment_decoded_but_for_percent_and_slash():
    assert routed_path(b"/v1/share-groups/a%20b%2Fc%25d/config") == (
        "/v1/share-groups/a b%2Fc%25d/config"
    )
    assert routed_path(b"/v1/share-groups/%C3%BC") == "/v1/share-groups/ü"
    assert path_names._Name().to_string("team/orders?") == "team%2Forders%3F"


def test_a_call_is_passed_on_with_the_path_and_query_the_client_sent():
    from starlette.requests import Request

    from shareproxy.admin.path_names import sent_path, sent_query

    raw = b"/v1/share-groups/team%2Forders%3Fv%3D1/offsets"
    scope = {"type": "http", "raw_path": raw, "path": routed_path(raw), "query_string": b"topic=t"}
    assert sent_path(Request(scope)) == raw.decode()
    assert sent_query(Request(scope)) == "topic=t"
    without_raw = {"type": "http", "path": "/v1/share-groups/100%25/config", "query_string": b""}
    assert sent_path(Request(without_raw)) == "/v1/share-groups/100%25/config"
