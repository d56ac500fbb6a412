"""A REST action naming a member no one knows is refused (UNKNOWN_MEMBER_ID), not answered with
nothing done: the admin app on the runtime as the proxy wires it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx

from shareproxy.admin.app import create_app
from shareproxy.admin.health import ReadinessProbes
from tests.support.admin_app import Directory
from tests.support.middle import MiddleRuntime, on_middle_runtime
from tests.support.share_calls import GROUP, fetch


class Open:
    """Security off: every caller is anonymous and allowed."""

    enabled = False

    def allowed(self, *_: object, audit: bool = True) -> bool:
        return True


async def _nothing() -> None:
    return None


@contextlib.asynccontextmanager
async def rest(runtime: MiddleRuntime) -> AsyncIterator[httpx.AsyncClient]:
    probes = ReadinessProbes(store=_nothing, upstream=_nothing, listener=lambda: True, owned=dict)
    admin = runtime.runtime.group_admin
    app = create_app(probes, admin, Open(), runtime.consumers, object(), Directory())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://admin") as http:
        yield http


@on_middle_runtime(coordinates=True)
async def test_releasing_an_unknown_member_is_404_and_a_known_ones_locks_are_released(
    runtime: MiddleRuntime,
):
    t = runtime.topic()
    runtime.produce(t, 5)
    tp = await runtime.partition(t)
    joined = await runtime.coordinator.heartbeat(
        GROUP, "m1", 0, subscribed=[t], rack_id=None, client_id="c", client_host="h"
    )
    assert joined.error is None
    assert await fetch(runtime, "m1", tp) == [(0, 4, 1)]
    async with rest(runtime) as http:
        unknown = await http.post(f"/v1/share-groups/{GROUP}/members/NoSuchMember/release")
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["error_code"] == "UNKNOWN_MEMBER_ID"
        assert "'NoSuchMember'" in unknown.json()["message"]
        released = await http.post(f"/v1/share-groups/{GROUP}/members/m1/release")
        assert released.status_code == 200, released.text
        assert released.json()["released"] == [{"topic": t, "partition": 0, "offsets": [[0, 4]]}]
        again = await http.post(f"/v1/share-groups/{GROUP}/members/m1/release")
        assert (again.status_code, again.json()["released"]) == (200, [])  # a member, idle
