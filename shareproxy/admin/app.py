"""The admin application and its server (uvicorn on the proxy's event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvicorn
from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shareproxy import __version__
from shareproxy.admin import (
    answering,
    archived_api,
    console,
    errors,
    group_stats_api,
    groups_api,
    inflight_api,
    nodes_api,
    path_names,  # registers the {…:name} convertors the routers' paths use
    push_api,
    records_api,
    security_api,
)
from shareproxy.admin.auth import AdminAuth
from shareproxy.admin.forwarding import PeerClient
from shareproxy.admin.health import ReadinessProbes, router
from shareproxy.runtime.archive import ArchivedRecords
from shareproxy.runtime.consuming import ShareConsumers
from shareproxy.runtime.directory import NodeDirectory
from shareproxy.runtime.groups import GroupAdmin
from shareproxy.security.guard import Security
from shareproxy.settings.push_targets import PushTargets
from shareproxy.telemetry import metrics


def create_app(
    probes: ReadinessProbes,
    admin: GroupAdmin,
    security: Security,
    consumers: ShareConsumers,
    archived: ArchivedRecords,
    directory: NodeDirectory,
    *,
    push_targets: PushTargets | None = None,
    push_status: push_api.StatusOf = lambda group_id: None,
) -> FastAPI:
    """``push_targets``: where pushes may go (none: push is off); ``push_status``: this node's
    part of a group's push status, from the node's pushers."""
    peers = PeerClient()  # closed by AdminServer.stop
    app = FastAPI(
        title="shareproxy admin",
        version=__version__,
        description="Share groups (KIP-932) on a Kafka cluster without them: manage groups, "
        "offsets and configs, and consume over HTTP.",
    )
    errors.install(app)
    answering.install(app, answering.Routing(admin, directory, peers))
    app.add_middleware(path_names.RawSegments)
    app.include_router(router(probes))

    @app.get("/metrics", include_in_schema=False)
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    app.state.auth = AdminAuth(security)
    app.include_router(groups_api.router(admin))
    app.include_router(group_stats_api.router(admin))
    app.include_router(inflight_api.router(admin))
    app.include_router(archived_api.router(archived, admin))
    app.include_router(records_api.router(consumers, admin))
    targets = push_targets or PushTargets()
    app.include_router(push_api.router(admin, consumers, targets, push_status))
    app.include_router(nodes_api.router(directory))
    app.include_router(security_api.router(security))
    console.install(app)
    return app


class AdminServer:
    """uvicorn on a socket bound beforehand (so the proxy reports a port in use itself). What
    the app holds (its client of the other nodes) is released when the server stops: not by
    an ASGI lifespan, which uvicorn reports as an error when a start is cut short."""

    def __init__(self, app: FastAPI, sock: socket.socket) -> None:
        host, port = sock.getsockname()[:2]
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", lifespan="off", log_config=None
        )  # log_config None: uvicorn logs through the proxy's handler and format
        self._server = uvicorn.Server(config)
        self._app = app
        self._socket = sock
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve([self._socket]), name="admin-http")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it could not start
            await asyncio.sleep(0.01)

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    async def stop(self) -> None:
        if self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await answering.close(self._app)
