"""The admin application and its server (uvicorn on the proxy's event loop)."""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn
from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shareproxy import __version__, metrics
from shareproxy.admin import errors, groups_api, records_api, security_api
from shareproxy.admin.auth import AdminAuth
from shareproxy.admin.health import ReadinessProbes, router
from shareproxy.broker.group_admin import GroupAdmin
from shareproxy.security.guard import Security


def create_app(
    probes: ReadinessProbes, admin: GroupAdmin | None = None, security: Security | None = None
) -> FastAPI:
    app = FastAPI(
        title="shareproxy admin",
        version=__version__,
        description="Share groups (KIP-932) on a Kafka cluster without them: manage groups, "
        "offsets and configs, and consume over HTTP.",
    )
    errors.install(app)
    app.include_router(router(probes))

    @app.get("/metrics", include_in_schema=False)
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    if admin is not None and security is not None:
        app.state.auth = AdminAuth(security)
        app.include_router(groups_api.router(admin))
        app.include_router(records_api.router(admin))
        app.include_router(security_api.router(security))
    return app


class AdminServer:
    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", lifespan="off", log_config=None
        )  # log_config None: uvicorn logs through the proxy's handler and format
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(), name="admin-http")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises why it could not start (port in use, …)
            await asyncio.sleep(0.01)

    @property
    def port(self) -> int:
        servers = getattr(self._server, "servers", [])
        for s in servers:
            for sock in s.sockets:
                return int(sock.getsockname()[1])
        return self._server.config.port

    async def stop(self) -> None:
        if self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
