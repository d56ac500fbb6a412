"""asyncio services: the Kafka listener and its handlers, the partition leaders, the group
coordinator runtime and the upstream reader."""
