"""Liveness and readiness: /healthz says the process is up; /readyz that the state store and
the upstream cluster answer and the Kafka listener accepts connections, and what this node
leads and coordinates (with several nodes, which one serves what)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

PROBE_TIMEOUT_S = 2.0


@dataclass
class ReadinessProbes:
    store: Callable[[], Awaitable[None]]
    upstream: Callable[[], Awaitable[None]]
    listener: Callable[[], bool]
    owned: Callable[[], Mapping[str, object]]  # what this node leads and coordinates


def router(probes: ReadinessProbes) -> APIRouter:
    r = APIRouter()

    @r.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @r.get("/readyz")
    async def readyz() -> Response:
        checks: dict[str, str] = {}
        for name, probe in (("store", probes.store), ("upstream", probes.upstream)):
            try:
                await asyncio.wait_for(probe(), PROBE_TIMEOUT_S)
                checks[name] = "ok"
            except Exception as exc:  # any failure means "not ready", with the reason
                checks[name] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
        checks["listener"] = "ok" if probes.listener() else "not accepting"
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks, "node": probes.owned()},
            status_code=200 if ready else 503,
        )

    return r
