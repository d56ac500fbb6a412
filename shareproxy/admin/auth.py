"""Who is calling the admin API, and may they: HTTP Basic with the proxy's users (the same
SCRAM credentials as SASL) or a bearer token from POST /v1/tokens; then the same ACL decision
as on the Kafka listener. 401 without valid credentials, 403 when an ACL refuses."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request

from shareproxy.core.acl import CLUSTER_NAME, Operation, ResourceType
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.security.guard import Security
from shareproxy.security.scram import MECHANISMS, verify_password

ANONYMOUS = "User:ANONYMOUS"
# the answer to a 401: a browser asks for a user and password
CHALLENGE = 'Basic realm="shareproxy", charset="UTF-8"'
_REFUSAL = {
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
}


class Unauthenticated(Exception):
    """No or wrong credentials (HTTP 401)."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Caller:
    principal: str
    host: str
    security: Security

    def allowed(self, op: Operation, rtype: ResourceType, name: str, *, audit: bool = True) -> bool:
        return self.security.allowed(self.principal, self.host, op, rtype, name, audit=audit)

    def require(self, op: Operation, rtype: ResourceType, name: str = CLUSTER_NAME) -> None:
        if not self.allowed(op, rtype, name):
            what = "the cluster" if rtype == ResourceType.CLUSTER else f"{rtype.name} {name!r}"
            raise ShareError(_REFUSAL[rtype], f"{self.principal} may not {op.name} {what}")

    def require_topics(self, op: Operation, topics: Iterable[str]) -> None:
        """``op`` on each topic, each named once."""
        for name in dict.fromkeys(topics):
            self.require(op, ResourceType.TOPIC, name)


class AdminAuth:
    def __init__(self, security: Security) -> None:
        self.security = security

    async def caller(self, request: Request) -> Caller:
        host = request.client.host if request.client else ""
        principal = await self._principal(request.headers.get("authorization"))
        return Caller(principal, host, self.security)

    async def _principal(self, header: str | None) -> str:
        if not self.security.enabled:
            return ANONYMOUS  # no security: everyone is anonymous and allowed
        if not header:
            raise Unauthenticated("credentials required (HTTP Basic or a bearer token)")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError) as exc:
                raise Unauthenticated("malformed Basic credentials") from exc
            cred = self.security.credential(user, MECHANISMS[-1]) if sep else None
            if cred is None or not verify_password(cred, password):
                raise Unauthenticated("invalid user name or password")
            return f"User:{user}"
        if scheme.lower() == "bearer" and value:
            owner = await self.security.store.token_user(token_hash(value), datetime.now(UTC))
            if owner is None or self.security.credential(owner, MECHANISMS[-1]) is None:
                raise Unauthenticated("invalid or expired token")
            return f"User:{owner}"
        raise Unauthenticated("use HTTP Basic or a bearer token")


async def current_caller(request: Request) -> Caller:
    """The FastAPI dependency: the app's AdminAuth (set by create_app) resolves the caller."""
    auth: AdminAuth = request.app.state.auth
    return await auth.caller(request)


CallerDep = Annotated[Caller, Depends(current_caller)]
