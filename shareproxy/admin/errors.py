"""Every REST error is ``{"error_code": NAME, "message": text}`` with a fitting HTTP status, the
name being the Kafka error the same refusal gets on the Kafka listener."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from shareproxy.admin.auth import CHALLENGE, Unauthenticated
from shareproxy.admin.forwarding import CoordinatorUnreachable
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.core.group_config import GroupConfigError
from shareproxy.core.reset_plan import DATETIME_FORM
from shareproxy.core.store import COORDINATOR_UNAVAILABLE, StoreUnavailable
from shareproxy.telemetry.logs import STORE_OUTAGE, first_line
from shareproxy.upstream.client import UpstreamError

STATUS = {
    ErrorCode.GROUP_ID_NOT_FOUND: 404,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.UNKNOWN_TOPIC_ID: 404,
    ErrorCode.NON_EMPTY_GROUP: 409,
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: 409,
    ErrorCode.INVALID_CONFIG: 422,
    ErrorCode.INVALID_REQUEST: 422,
    ErrorCode.INVALID_GROUP_ID: 422,
    ErrorCode.INVALID_TOPIC_EXCEPTION: 422,
    ErrorCode.INVALID_RECORD_STATE: 409,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: 403,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: 403,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: 403,
    ErrorCode.SECURITY_DISABLED: 400,
    ErrorCode.NOT_COORDINATOR: 421,  # misdirected: another proxy node coordinates the group
    ErrorCode.NOT_LEADER_OR_FOLLOWER: 503,  # retriable: led elsewhere now, or not yet loaded
    ErrorCode.COORDINATOR_NOT_AVAILABLE: 503,  # retriable: the state store is out of reach
    ErrorCode.FENCED_STATE_EPOCH: 503,  # retriable: the state moved to a newer writer
    ErrorCode.REQUEST_TIMED_OUT: 503,
    ErrorCode.NETWORK_EXCEPTION: 503,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: 503,
    ErrorCode.SHARE_SESSION_NOT_FOUND: 404,
    ErrorCode.UNKNOWN_MEMBER_ID: 404,
    ErrorCode.RESOURCE_NOT_FOUND: 404,  # a user, or ACL rules matching a filter
    ErrorCode.INVALID_SHARE_SESSION_EPOCH: 409,
}
# any other refusal is the caller's request meeting a rule: never a 5xx
REFUSED = 400


class Error(BaseModel):
    """Every error's body."""

    error_code: str = Field(
        description="The Kafka error the same refusal gets on the Kafka listener (e.g. "
        "GROUP_ID_NOT_FOUND), or what HTTP itself refused (INVALID_REQUEST, MALFORMED_JSON, "
        "NOT_FOUND, METHOD_NOT_ALLOWED)"
    )
    message: str = Field(description="What failed, in one line")


def body(code: str, message: str) -> dict[str, str]:
    return Error(error_code=code, message=message).model_dump()


_INVALID = "The request does not fit the schemas: INVALID_REQUEST, its message naming each field"
_OTHER = "Refused or failed: the status and error_code say why"


def document(app: FastAPI) -> None:
    """The OpenAPI document says what the errors are: FastAPI lists its own validation-error
    schema for each operation's 422, a body this app never sends (``install`` answers every
    error with ``Error``); and every other error status is ``default``, with the same body."""
    made = app.openapi

    def openapi() -> dict[str, Any]:
        schema = made()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        if "Error" in components:  # made and corrected before
            return schema
        ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                responses = operation.setdefault("responses", {})
                if "422" in responses:
                    responses["422"] = {"description": _INVALID, "content": ref}
                responses["default"] = {"description": _OTHER, "content": ref}
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components["Error"] = Error.model_json_schema()
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI) -> None:
    document(app)

    @app.exception_handler(ShareError)
    async def share_error(_: Request, exc: ShareError) -> JSONResponse:
        return JSONResponse(body(exc.code.name, exc.message), STATUS.get(exc.code, REFUSED))

    @app.exception_handler(Unauthenticated)
    async def unauthenticated(_: Request, exc: Unauthenticated) -> JSONResponse:
        return JSONResponse(
            body("SASL_AUTHENTICATION_FAILED", str(exc)),
            401,
            headers={"WWW-Authenticate": CHALLENGE},
        )

    @app.exception_handler(CoordinatorUnreachable)
    async def unreachable(_: Request, exc: CoordinatorUnreachable) -> JSONResponse:
        return JSONResponse(body(COORDINATOR_UNAVAILABLE.name, str(exc)), 503)

    @app.exception_handler(GroupConfigError)
    async def config_error(_: Request, exc: GroupConfigError) -> JSONResponse:
        return JSONResponse(body("INVALID_CONFIG", str(exc)), 422)

    @app.exception_handler(UpstreamError)
    async def upstream_error(_: Request, exc: UpstreamError) -> JSONResponse:
        return JSONResponse(body("UPSTREAM_UNAVAILABLE", f"the Kafka cluster: {exc}"), 503)

    @app.exception_handler(StoreUnavailable)
    async def store_down(request: Request, exc: StoreUnavailable) -> JSONResponse:
        """Retriable, as the Kafka listener answers it: one line, and one warning per outage."""
        why = first_line(exc)
        STORE_OUTAGE.failed(f"{request.method} {request.url.path}", why)
        return JSONResponse(
            body(
                COORDINATOR_UNAVAILABLE.name,
                f"the share-group state store cannot be reached: {why}; retry",
            ),
            STATUS[COORDINATOR_UNAVAILABLE],
        )

    @app.exception_handler(OSError)
    async def connection_failed(_: Request, exc: OSError) -> JSONResponse:
        """A connection of the request's own (the store's come as StoreUnavailable)."""
        return JSONResponse(
            body(COORDINATOR_UNAVAILABLE.name, f"a connection failed: {first_line(exc)}; retry"),
            STATUS[COORDINATOR_UNAVAILABLE],
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return JSONResponse(body("MALFORMED_JSON", "the request body is not valid JSON"), 400)
        parts = []
        for e in errors:
            where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            why = str(e.get("msg"))
            if str(e.get("type", "")).startswith(("datetime_", "date_")):
                why += f"; expected {DATETIME_FORM}"
            parts.append(f"{where}: {why}" if where else why)
        return JSONResponse(body("INVALID_REQUEST", "; ".join(parts)), 422)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        name = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        return JSONResponse(body(name, str(exc.detail)), exc.status_code)
