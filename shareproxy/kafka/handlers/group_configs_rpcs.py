"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: the GROUP resource type (share.*
configs) answered here, so `kafka-configs.sh --entity-type groups` and the Admin client manage
them as on Kafka; every other resource type goes to the upstream cluster (upstream_configs.py)."""

from __future__ import annotations

from datetime import timedelta
from types import ModuleType
from typing import Any

from shareproxy.core import group_config
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.core.errors import ErrorCode
from shareproxy.core.group_config import GroupConfigError
from shareproxy.core.names import group_id_problem, shown
from shareproxy.kafka.context import Connection
from shareproxy.kafka.contexts import AdminRpcContext
from shareproxy.kafka.handlers import upstream_configs
from shareproxy.kafka.responses import KioEntity, build, error, schema_module
from shareproxy.protocol.codec import Request, response_type

GROUP = 32  # ConfigResource.Type GROUP
CONFIG_SOURCE_GROUP = 8  # GROUP_CONFIG
CONFIG_SOURCE_DEFAULT = 5  # DEFAULT_CONFIG: the proxy-wide default from `serve`
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "double": 6}  # Kafka's ConfigType
SET, DELETE = 0, 1
NOT_GROUP = "group configs are altered with IncrementalAlterConfigs"


async def describe_configs(ctx: AdminRpcContext, conn: Connection, request: Request) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    body = request.body
    others = await upstream_configs.answer(
        ctx, conn, request, [r for r in body.resources if r.resource_type != GROUP]
    )
    results = []
    for resource in body.resources:
        if resource.resource_type != GROUP:
            results.append(others[id(resource)])
            continue
        group_id = resource.resource_name
        problem = group_id_problem(group_id)
        if problem is not None:
            results.append(_describe_result(m, resource, ErrorCode.INVALID_GROUP_ID, problem))
            continue
        if not ctx.allowed(conn, Operation.DESCRIBE_CONFIGS, ResourceType.GROUP, group_id):
            results.append(
                _describe_result(
                    m, resource, ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized"
                )
            )
            continue
        overrides = ctx.admin.config_overrides(group_id)
        effective = ctx.settings_for(group_id).as_configs()
        keys = resource.configuration_keys
        unknown = [k for k in keys or () if k not in group_config.DEFINITIONS]
        if unknown:
            results.append(
                _describe_result(
                    m,
                    resource,
                    ErrorCode.INVALID_CONFIG,
                    f"unknown group config {shown(unknown[0])}",
                )
            )
            continue
        entries = [
            build(
                m.DescribeConfigsResourceResult,
                name=name,
                value=effective[name],
                read_only=False,
                config_source=CONFIG_SOURCE_GROUP if name in overrides else CONFIG_SOURCE_DEFAULT,
                is_sensitive=False,
                synonyms=(),
                config_type=CONFIG_TYPES[d.kind],
                documentation=d.doc if getattr(body, "include_documentation", False) else None,
            )
            for name, d in group_config.DEFINITIONS.items()
            if keys is None or name in keys
        ]
        results.append(_describe_result(m, resource, ErrorCode.NONE, None, entries))
    return build(cls, throttle_time=timedelta(0), results=tuple(results))


def _describe_result(
    m: ModuleType,
    resource: Any,
    code: ErrorCode,
    message: str | None,
    configs: list[Any] | None = None,
) -> KioEntity:
    return build(
        m.DescribeConfigsResult,
        error_code=error(code),
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=tuple(configs or ()),
    )


async def incremental_alter_configs(
    ctx: AdminRpcContext, conn: Connection, request: Request
) -> KioEntity:
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    body = request.body
    others = await upstream_configs.answer(
        ctx, conn, request, [r for r in body.resources if r.resource_type != GROUP]
    )
    responses = []
    for resource in body.resources:
        if resource.resource_type != GROUP:
            responses.append(others[id(resource)])
            continue
        code, message = ErrorCode.NONE, None
        problem = group_id_problem(resource.resource_name)
        if problem is not None:
            code, message = ErrorCode.INVALID_GROUP_ID, problem
        elif not ctx.allowed(
            conn, Operation.ALTER_CONFIGS, ResourceType.GROUP, resource.resource_name
        ):
            code, message = ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized"
        else:
            changes: dict[str, str | None] = {}
            for c in resource.configs:
                if c.config_operation == SET and c.value is not None:
                    changes[c.name] = c.value
                elif c.config_operation == DELETE:
                    changes[c.name] = None
                else:
                    code = ErrorCode.INVALID_REQUEST
                    message = f"{c.name}: only SET (with a value) and DELETE apply to group configs"
                    break
            dead_letter_topic = changes.get(group_config.DLQ_TOPIC)
            if (
                code == ErrorCode.NONE
                and dead_letter_topic
                and not ctx.allowed(conn, Operation.WRITE, ResourceType.TOPIC, dead_letter_topic)
            ):  # the proxy writes there on the group's behalf: its configurer must be able to
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                message = f"{group_config.DLQ_TOPIC}: not authorized to Write {dead_letter_topic}"
            if code == ErrorCode.NONE:
                try:
                    await ctx.admin.alter_configs(
                        resource.resource_name, changes, validate_only=body.validate_only
                    )
                except GroupConfigError as exc:
                    code, message = ErrorCode.INVALID_CONFIG, str(exc)
        responses.append(
            build(
                m.AlterConfigsResourceResponse,
                error_code=error(code),
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return build(cls, throttle_time=timedelta(0), responses=tuple(responses))


async def alter_configs(ctx: AdminRpcContext, conn: Connection, request: Request) -> KioEntity:
    """The legacy AlterConfigs (whole config sets): upstream resources only, as Kafka takes
    group configs through IncrementalAlterConfigs alone."""
    cls = response_type(request.api_key, request.api_version)
    m = schema_module(cls)
    body = request.body
    others = await upstream_configs.answer(
        ctx, conn, request, [r for r in body.resources if r.resource_type != GROUP]
    )
    responses = [
        others[id(r)]
        if r.resource_type != GROUP
        else build(
            m.AlterConfigsResourceResponse,
            error_code=error(ErrorCode.INVALID_REQUEST),
            error_message=NOT_GROUP,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in body.resources
    ]
    return build(cls, throttle_time=timedelta(0), responses=tuple(responses))
