"""A topic's configs read, and a topic created, on the real cluster (DescribeConfigs v1 and
CreateTopics v5: what every Kafka since 2.4 and Tansu answer), for the dead-letter writer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from kio.schema.create_topics.v5 import request as create_req
from kio.schema.describe_configs.v1 import request as describe_req
from kio.static.primitive import i8, i16, i32

from shareproxy.core.errors import ErrorCode
from shareproxy.protocol.kio_types import as_i32_timedelta, as_topic_name
from shareproxy.upstream.client import Upstream, UpstreamError

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
CREATE_TIMEOUT = timedelta(seconds=30)


async def topic_configs(upstream: Upstream, topic: str, names: Iterable[str]) -> dict[str, str]:
    """The values the cluster reports of ``names`` for ``topic``: a Kafka broker reports each
    config it knows, set or not; Tansu only those the topic was given. All are asked for and
    the rest dropped here, as Tansu closes the connection on a request that names keys."""
    wanted = set(names)
    response = await upstream.send(
        await upstream.any_node(),
        describe_req.DescribeConfigsRequest(
            resources=(
                describe_req.DescribeConfigsResource(
                    resource_type=i8(TOPIC_RESOURCE),
                    resource_name=topic,
                    configuration_keys=None,
                ),
            ),
        ),
    )
    (result,) = response.results
    if result.error_code != ErrorCode.NONE:
        raise UpstreamError(
            f"DescribeConfigs {topic} failed with error {result.error_code}"
            + (f": {result.error_message}" if result.error_message else ""),
            int(result.error_code),
        )
    return {c.name: c.value for c in result.configs if c.name in wanted and c.value is not None}


async def create_topic(upstream: Upstream, topic: str, configs: Mapping[str, str]) -> int:
    """Create ``topic`` with the cluster's default partitions and replication and ``configs``;
    the answer's error code (NONE, or TOPIC_ALREADY_EXISTS when another got there first)."""
    response = await upstream.send(
        await upstream.any_node(),
        create_req.CreateTopicsRequest(
            topics=(
                create_req.CreatableTopic(
                    name=as_topic_name(topic),
                    num_partitions=i32(-1),
                    replication_factor=i16(-1),
                    assignments=(),
                    configs=tuple(
                        create_req.CreatableTopicConfig(name=name, value=value)
                        for name, value in configs.items()
                    ),
                ),
            ),
            timeout=as_i32_timedelta(CREATE_TIMEOUT),
            validate_only=False,
        ),
    )
    (result,) = response.topics
    code = int(result.error_code)
    if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_CONFIG):
        raise UpstreamError(
            f"CreateTopics {topic} failed with error {code}"
            + (f": {result.error_message}" if result.error_message else ""),
            code,
        )
    return code
