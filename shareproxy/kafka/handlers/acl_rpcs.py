"""CreateAcls, DescribeAcls and DeleteAcls (v0-v3), so kafka-acls.sh and Admin clients manage
the proxy's ACLs. Describing needs Describe on the Cluster, changing needs Alter."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from shareproxy.core.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from shareproxy.core.errors import ErrorCode
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import AclContext
from shareproxy.kafka.responses import KioEntity, build, error, schema_module
from shareproxy.protocol.codec import Request, response_type
from shareproxy.protocol.kio_types import NO_THROTTLE

E = TypeVar("E", bound=IntEnum)


def _enum(kind: type[E], value: int) -> E:
    try:
        return kind(int(value))
    except ValueError as exc:
        raise AclError(f"unknown {kind.__name__} {value}") from exc


def _cluster(ctx: AclContext, conn: Connection, op: Operation) -> bool:
    return ctx.allowed(conn, op, ResourceType.CLUSTER, CLUSTER_NAME)


def _filter(f: Any, version: int) -> AclFilter:
    pattern = getattr(f, "pattern_type_filter", PatternType.LITERAL)  # v0: literal only
    return AclFilter(
        principal=f.principal_filter,
        host=f.host_filter,
        resource_type=_enum(ResourceType, f.resource_type_filter),
        resource_name=f.resource_name_filter,
        pattern_type=_enum(PatternType, pattern),
        operation=_enum(Operation, f.operation),
        permission=_enum(Permission, f.permission_type),
    )


async def create_acls(ctx: AclContext, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    allowed = _cluster(ctx, conn, Operation.ALTER)
    results, valid = [], []
    for c in request.body.creations:
        code, message = ErrorCode.NONE, None
        if not allowed:
            code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the cluster needed"
        else:
            try:
                binding = AclBinding(
                    c.principal,
                    c.host,
                    _enum(ResourceType, c.resource_type),
                    c.resource_name,
                    _enum(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
                    _enum(Operation, c.operation),
                    _enum(Permission, c.permission_type),
                ).validate()
                valid.append(binding)
            except AclError as exc:
                code, message = ErrorCode.INVALID_REQUEST, str(exc)
        results.append((code, message))
    if valid:
        await ctx.security.create_acls(valid)
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(m.AclCreationResult, error_code=error(code), error_message=message)
            for code, message in results
        ),
    )


async def describe_acls(ctx: AclContext, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    if not _cluster(ctx, conn, Operation.DESCRIBE):
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            error_message="Describe on the cluster needed",
            resources=(),
        )
    try:
        found = ctx.security.describe(_filter(request.body, request.api_version))
    except AclError as exc:
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=error(ErrorCode.INVALID_REQUEST),
            error_message=str(exc),
            resources=(),
        )
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in found:
        key = (int(b.resource_type), b.resource_name, int(b.pattern_type))
        grouped.setdefault(key, []).append(b)
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=error(0),
        error_message=None,
        resources=tuple(
            build(
                m.DescribeAclsResource,
                resource_type=rtype,
                resource_name=name,
                pattern_type=pattern,
                acls=tuple(
                    m.AclDescription(
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission),
                    )
                    for b in bindings
                ),
            )
            for (rtype, name, pattern), bindings in grouped.items()
        ),
    )


async def delete_acls(ctx: AclContext, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    allowed = _cluster(ctx, conn, Operation.ALTER)
    filters: list[AclFilter] = []
    problems: dict[int, tuple[ErrorCode, str]] = {}
    for i, f in enumerate(request.body.filters):
        if not allowed:
            problems[i] = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the cluster needed")
            continue
        try:
            filters.append(_filter(f, request.api_version))
        except AclError as exc:
            problems[i] = (ErrorCode.INVALID_REQUEST, str(exc))
    deleted = iter(await ctx.security.delete_acls(filters) if filters else [])
    results = []
    for i in range(len(request.body.filters)):
        if i in problems:
            code, message = problems[i]
            results.append(
                build(
                    m.DeleteAclsFilterResult,
                    error_code=error(code),
                    error_message=message,
                    matching_acls=(),
                )
            )
            continue
        results.append(
            build(
                m.DeleteAclsFilterResult,
                error_code=error(0),
                error_message=None,
                matching_acls=tuple(
                    build(
                        m.DeleteAclsMatchingAcl,
                        error_code=error(0),
                        error_message=None,
                        resource_type=int(b.resource_type),
                        resource_name=b.resource_name,
                        pattern_type=int(b.pattern_type),
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission),
                    )
                    for b in next(deleted)
                ),
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(results))
