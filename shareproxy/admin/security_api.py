"""Users, ACLs and API tokens over REST. Listing needs Describe on the Cluster, changing needs
Alter; a token is issued to whoever authenticates, for themselves."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from pydantic import Field

from shareproxy.admin.answering import anyone_this_node, cluster_call
from shareproxy.admin.auth import ANONYMOUS, Caller, token_hash
from shareproxy.admin.params import Strict, UserName
from shareproxy.core.acl import (
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_enum,
)
from shareproxy.core.errors import ErrorCode, ShareError
from shareproxy.security.guard import Security
from shareproxy.security.scram import (
    ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    InvalidUser,
    make_credentials,
)

Q = Annotated[str | None, Query()]  # an optional filter field


class NewUser(Strict):
    name: UserName
    password: str = Field(min_length=1, repr=False)
    iterations: int = Field(default=ITERATIONS, ge=MIN_ITERATIONS, le=MAX_ITERATIONS)


class User(Strict):
    name: str
    mechanisms: list[str]


class Acl(Strict):
    principal: str = Field(examples=["User:alice"])
    host: str = "*"
    resource_type: str = Field(examples=["Group", "Topic", "Cluster"])
    resource_name: str
    pattern_type: str = "LITERAL"
    operation: str = Field(examples=["Read", "Describe", "Alter"])
    permission: str = "ALLOW"


class Token(Strict):
    token: str
    principal: str
    expires_at: datetime


class TokenRequest(Strict):
    lifetime_s: int = Field(default=3600, ge=60, le=30 * 86400)


def _binding(a: Acl) -> AclBinding:
    try:
        return AclBinding(
            a.principal,
            a.host,
            parse_enum(ResourceType, a.resource_type),
            a.resource_name,
            parse_enum(PatternType, a.pattern_type),
            parse_enum(Operation, a.operation),
            parse_enum(Permission, a.permission),
        ).validate()
    except AclError as exc:
        raise ShareError(ErrorCode.INVALID_REQUEST, str(exc)) from exc


def _acl(b: AclBinding) -> Acl:
    return Acl(
        principal=b.principal,
        host=b.host,
        resource_type=b.resource_type.name,
        resource_name=b.resource_name,
        pattern_type=b.pattern_type.name,
        operation=b.operation.name,
        permission=b.permission.name,
    )


def acl_filter(
    principal: Q = None,
    host: Q = None,
    resource_type: Q = None,
    resource_name: Q = None,
    pattern_type: Q = None,
    operation: Q = None,
    permission: Q = None,
) -> AclFilter:
    """The query parameters of GET and DELETE /v1/acls; missing ones match anything."""
    try:
        return AclFilter(
            principal=principal,
            host=host,
            resource_type=parse_enum(ResourceType, resource_type)
            if resource_type
            else ResourceType.ANY,
            resource_name=resource_name,
            pattern_type=parse_enum(PatternType, pattern_type) if pattern_type else PatternType.ANY,
            operation=parse_enum(Operation, operation) if operation else Operation.ANY,
            permission=parse_enum(Permission, permission) if permission else Permission.ANY,
        )
    except AclError as exc:
        raise ShareError(ErrorCode.INVALID_REQUEST, str(exc)) from exc


FilterDep = Annotated[AclFilter, Depends(acl_filter)]


def router(security: Security) -> APIRouter:
    r = APIRouter(prefix="/v1", tags=["security"])

    @r.get("/users", response_model=list[User])
    async def list_users(
        _: Annotated[Caller, Depends(cluster_call(Operation.DESCRIBE))],
    ) -> list[User]:
        creds = await security.store.credentials()
        by_user: dict[str, list[str]] = {}
        for c in creds:
            by_user.setdefault(c.username, []).append(c.mechanism)
        return [User(name=u, mechanisms=sorted(m)) for u, m in sorted(by_user.items())]

    @r.post("/users", response_model=User, status_code=201)
    async def put_user(
        _: Annotated[Caller, Depends(cluster_call(Operation.ALTER))],
        user: NewUser,
        response: Response,
    ) -> User:
        """Create a user, or set a new password for an existing one (200)."""
        try:
            creds = make_credentials(user.name, user.password, user.iterations)
        except InvalidUser as exc:
            raise ShareError(ErrorCode.INVALID_REQUEST, str(exc)) from exc
        if not await security.put_user(creds):
            response.status_code = 200
        return User(name=user.name, mechanisms=[c.mechanism for c in creds])

    @r.delete("/users/{name:name}", status_code=204)
    async def delete_user(
        _: Annotated[Caller, Depends(cluster_call(Operation.ALTER))], name: UserName
    ) -> Response:
        if not await security.delete_user(name):
            raise ShareError(ErrorCode.RESOURCE_NOT_FOUND, f"no user {name!r}")
        return Response(status_code=204)

    @r.get("/acls", response_model=list[Acl])
    async def list_acls(
        _: Annotated[Caller, Depends(cluster_call(Operation.DESCRIBE))], f: FilterDep
    ) -> list[Acl]:
        await security.load()  # the store's rules as they are now
        return [_acl(b) for b in security.describe(f)]

    @r.post("/acls", response_model=list[Acl], status_code=201)
    async def create_acls(
        _: Annotated[Caller, Depends(cluster_call(Operation.ALTER))], acls: list[Acl]
    ) -> list[Acl]:
        """Create rules (all validated first; existing ones are kept once)."""
        bindings = [_binding(a) for a in acls]
        await security.create_acls(bindings)
        return [_acl(b) for b in bindings]

    @r.delete("/acls", response_model=list[Acl])
    async def delete_acls(
        _: Annotated[Caller, Depends(cluster_call(Operation.ALTER))],
        f: FilterDep,
        all: Annotated[bool, Query(description="required to delete with an empty filter")] = False,
    ) -> list[Acl]:
        """Delete the rules the filter matches; returns them. A filter that matches none is
        404 RESOURCE_NOT_FOUND, so a mistyped name is not taken for a rule removed; all=true
        with no rules left is not."""
        if not all and f == AclFilter():
            raise ShareError(ErrorCode.INVALID_REQUEST, "an empty filter needs all=true")
        (deleted,) = await security.delete_acls([f])
        if not deleted and not all:
            raise ShareError(
                ErrorCode.RESOURCE_NOT_FOUND,
                "no ACL rule matches the filter: nothing was removed (`acls list` shows them)",
            )
        return [_acl(b) for b in deleted]

    @r.post("/tokens", response_model=Token, status_code=201)
    async def create_token(
        caller: Annotated[Caller, Depends(anyone_this_node)], request: TokenRequest | None = None
    ) -> Token:
        """A bearer token for the calling user (shown once; stored as a hash)."""
        if caller.principal == ANONYMOUS:
            raise ShareError(
                ErrorCode.SECURITY_DISABLED,
                "tokens are issued to authenticated users: enable SASL or TLS client "
                "certificates on a listener (see the documentation: Security)",
            )
        lifetime = (request or TokenRequest()).lifetime_s
        token = secrets.token_urlsafe(32)
        expires = datetime.now(UTC) + timedelta(seconds=lifetime)
        await security.store.add_token(
            token_hash(token), caller.principal.removeprefix("User:"), expires
        )
        return Token(token=token, principal=caller.principal, expires_at=expires)

    return r
