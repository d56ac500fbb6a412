"""A topic's id as the proxy's metadata gives it."""

from __future__ import annotations

import uuid

from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from tests.support.kafka_client import KafkaConnection


def topic_id(port: int, name: str) -> uuid.UUID:
    with KafkaConnection(port) as c:
        response = c.call(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=name),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    return response.topics[0].topic_id
