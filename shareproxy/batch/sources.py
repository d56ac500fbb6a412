"""PySpark Python data sources: the stored state, the source topics' offsets, and records.

They run in executors (one Spark partition per group chunk, per topic chunk, per offset range),
so no Maven connector is needed: the store is read through the proxy's own SQLAlchemy store,
offsets through its upstream client (aiokafka + kio: topic ids, log start, high watermark, LSO),
records through librdkafka. Executors need ``shareproxy[spark]`` installed, as the driver does.
A password is never an option (options show in plans): executors read it from the environment.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

UPSTREAM_PASSWORD_ENV = "SHAREPROXY_UPSTREAM_SASL_PASSWORD"

STATE_SCHEMA = (
    "group_id string, topic_id string, topic_name string, partition int, state_epoch int, "
    "start_offset long, batches array<array<long>>"
)
ARCHIVED_SCHEMA = (
    "group_id string, topic_id string, partition int, first_offset long, last_offset long, "
    "delivery_count int, archived_at timestamp"
)
OFFSETS_SCHEMA = (
    "topic string, topic_id string, partition int, log_start long, high_watermark long, "
    "last_stable long"
)
RECORDS_SCHEMA = (
    "tag string, topic string, partition int, offset long, timestamp long, key binary, "
    "value binary, headers array<struct<key:string,value:binary>>"
)


def chunks(items: Sequence[Any], n: int) -> list[list[Any]]:
    n = max(1, min(n, len(items)))
    return [list(items[i::n]) for i in range(n)] if items else []


# ----------------------------------------------------------------------------- the store
async def _store_call(url: str, method: str, *args: Any) -> Any:
    from shareproxy.persistence.engine import create_engine
    from shareproxy.persistence.repository import SqlShareStateStore

    engine = create_engine(url)
    try:
        return await getattr(SqlShareStateStore(engine), method)(*args)
    finally:
        await engine.dispose()


def store_call(url: str, method: str, *args: Any) -> Any:
    """One store method, run to completion (drivers and executors have no running loop)."""
    return asyncio.run(_store_call(url, method, *args))


class _StateReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.url = options["state_url"]
        self.kind = options.get("kind", "partitions")
        self.parallelism = int(options.get("parallelism", "4"))

    def partitions(self) -> Sequence[InputPartition]:
        groups = [g.group_id for g in store_call(self.url, "memberships")]
        return [InputPartition(c) for c in chunks(groups, self.parallelism)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        groups = partition.value
        if self.kind == "archived":
            for a in store_call(self.url, "archived", groups):
                k = a.key
                yield (
                    k.group_id,
                    str(k.topic_id),
                    k.partition,
                    a.first_offset,
                    a.last_offset,
                    a.delivery_count,
                    a.archived_at,
                )
            return
        for s in store_call(self.url, "scan", groups):
            state = s.loaded.state
            yield (
                s.key.group_id,
                str(s.key.topic_id),
                s.topic_name,
                s.key.partition,
                s.loaded.state_epoch,
                state.start_offset,
                [[b[0], b[1], int(b[2]), b[3]] for b in state.batches],
            )


class StateSource(DataSource):
    """``spark.read.format("shareproxy_state").option("state_url", …)``; ``kind`` is
    ``partitions`` (folded share-partition state) or ``archived`` (the archive log)."""

    @classmethod
    def name(cls) -> str:
        return "shareproxy_state"

    def schema(self) -> str:
        return ARCHIVED_SCHEMA if self.options.get("kind") == "archived" else STATE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _StateReader(dict(self.options))


# ----------------------------------------------------------------------------- the cluster
def upstream_settings(options: dict[str, str]) -> Any:
    from shareproxy.security.listeners import client_ssl_context
    from shareproxy.upstream.client import UpstreamSettings

    protocol = options.get("security_protocol", "PLAINTEXT")
    sasl = protocol.startswith("SASL_")
    tls = protocol in ("SSL", "SASL_SSL")
    return UpstreamSettings(
        bootstrap_servers=options["bootstrap_servers"],
        client_id="shareproxy-batch",
        security_protocol=protocol,
        sasl_mechanism=options.get("sasl_mechanism", "PLAIN") if sasl else None,
        sasl_plain_username=options.get("sasl_username") if sasl else None,
        sasl_plain_password=os.environ.get(UPSTREAM_PASSWORD_ENV) if sasl else None,
        ssl_context=client_ssl_context(options.get("ssl_cafile"), None, None) if tls else None,
    )


async def _offsets(options: dict[str, str], topics: Sequence[str] | None) -> list[Any]:
    from shareproxy.upstream.client import Upstream

    upstream = Upstream(upstream_settings(options))
    await upstream.start()
    try:
        found = await upstream.refresh_metadata(None if topics is None else list(topics))
        if topics is None:
            return sorted(found)  # the names, to split among the readers
        rows = []
        for name in topics:
            info = found.get(name)
            if info is None:
                continue  # deleted since the driver listed it
            for p, start, hwm, lso in await upstream.partition_offsets(name):
                rows.append((name, str(info.topic_id), p, start, hwm, lso))
        return rows
    finally:
        await upstream.close()


class _OffsetsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.parallelism = int(options.get("parallelism", "4"))

    def partitions(self) -> Sequence[InputPartition]:
        topics = asyncio.run(_offsets(self.options, None))
        return [InputPartition(c) for c in chunks(topics, self.parallelism)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from asyncio.run(_offsets(self.options, partition.value))


class OffsetsSource(DataSource):
    """Every partition of every topic: id, log start, high watermark, last stable offset."""

    @classmethod
    def name(cls) -> str:
        return "shareproxy_offsets"

    def schema(self) -> str:
        return OFFSETS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _OffsetsReader(dict(self.options))


def librdkafka_config(options: dict[str, str]) -> dict[str, Any]:
    protocol = options.get("security_protocol", "PLAINTEXT")
    config: dict[str, Any] = {
        "bootstrap.servers": options["bootstrap_servers"],
        "security.protocol": protocol,
        "group.id": "shareproxy-batch",  # never joined: partitions are assigned, not committed
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    }
    if protocol.startswith("SASL_"):
        config["sasl.mechanism"] = options.get("sasl_mechanism", "PLAIN")
        config["sasl.username"] = options.get("sasl_username", "")
        config["sasl.password"] = os.environ.get(UPSTREAM_PASSWORD_ENV, "")
    if options.get("ssl_cafile"):
        config["ssl.ca.location"] = options["ssl_cafile"]
    return config


class _RecordsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.ranges = json.loads(options["ranges"])  # [[tag, topic, partition, first, last]]
        self.timeout_s = float(options.get("timeout_s", "30"))

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        import time

        from confluent_kafka import Consumer, KafkaError, TopicPartition

        tag, topic, p, first, last = partition.value
        consumer = Consumer(librdkafka_config(self.options))
        try:
            consumer.assign([TopicPartition(topic, p, first)])
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is None:
                    continue
                failure = m.error()
                if failure is not None:
                    if failure.code() == KafkaError._PARTITION_EOF:
                        return
                    raise RuntimeError(f"reading {topic}-{p}: {failure}")
                if m.offset() > last:
                    return
                if m.offset() >= first:
                    found = m.headers() or []  # a list of pairs, as consumed
                    headers = list(found.items() if isinstance(found, dict) else found)
                    yield (tag, topic, p, m.offset(), m.timestamp()[1], m.key(), m.value(), headers)
                    if m.offset() == last:
                        return
            raise TimeoutError(f"reading {topic}-{p} [{first}, {last}] took over {self.timeout_s}s")
        finally:
            consumer.close()


class RecordsSource(DataSource):
    """Records of given offset ranges, one Spark partition per range; ``tag`` is carried
    through so callers can join a range's facts (group, delivery count) back."""

    @classmethod
    def name(cls) -> str:
        return "shareproxy_records"

    def schema(self) -> str:
        return RECORDS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _RecordsReader(dict(self.options))


SOURCES = (StateSource, OffsetsSource, RecordsSource)
