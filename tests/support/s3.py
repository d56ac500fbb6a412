"""Tansu on S3 storage, for the drifts Tansu 0.6 cannot make through the Kafka protocol.

Tansu 0.6 answers neither DeleteRecords nor CreatePartitions, and ignores retention.ms. Its S3
storage keeps each partition as one object per record batch plus a watermark object, and the
cluster's topics in one metadata object, and reads them afresh (through a 5 s cache) rather than
keeping its own copy. So the tests do to those objects what retention, an unclean leader
election and CreatePartitions do to a Kafka log: whole batches below the new log start go and
the log start moves; the batches past a new log end go; a topic's partition count grows; each
change is waited for until the broker shows it. The S3 server is moto's standalone server (a
real HTTP S3 endpoint with conditional writes, which Tansu needs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from confluent_kafka.admin import AdminClient

from shareproxy.demo.tansu import TansuBroker
from shareproxy.host.processes import free_port, spawn, stop_process, wait_for_port

BUCKET = "tansu"
TANSU_READ_CACHE_S = 5.0  # the object cache in Tansu 0.6's S3 storage (dynostore)
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "shareproxy-test",
    "AWS_SECRET_ACCESS_KEY": "shareproxy-test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """moto's S3 server on loopback with one bucket."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkdtemp(prefix="s3-")) / "s3.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> S3Server:
        with self.log_path.open("wb") as log:
            self.proc = spawn(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)], log
            )
        proc = self.proc
        try:
            wait_for_port(self.port, 30, "moto's S3 server", lambda: proc.poll() is None)
            self.client().create_bucket(Bucket=BUCKET)
        except BaseException:
            self.stop()
            raise
        return self

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        )

    def broker(self) -> TansuBroker:
        env = {**CREDENTIALS, "AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true"}
        return TansuBroker(storage=f"s3://{BUCKET}/", env=env)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


class TansuObjects:
    """A Tansu cluster's objects in the bucket."""

    def __init__(self, s3: S3Server, broker: TansuBroker, cluster: str = "tansu_cluster") -> None:
        self.client = s3.client()
        self.broker = broker
        self.root = f"clusters/{cluster}"

    def delete_records_before(self, topic: str, partition: int, offset: int) -> None:
        """What retention does: drop the batches below ``offset`` (a batch boundary) and move
        the log start there."""
        self._cut(topic, partition, offset, lambda base: base < offset, {"low": offset})

    def truncate(self, topic: str, partition: int, offset: int) -> None:
        """What an unclean leader election can do: the log ends at ``offset`` (a batch
        boundary), the batches from there on are gone."""
        self._cut(topic, partition, offset, lambda base: base >= offset, {"high": offset})

    def _cut(
        self,
        topic: str,
        partition: int,
        offset: int,
        drop: Callable[[int], bool],
        watermark: dict[str, int],
    ) -> None:
        prefix = f"{self.root}/topics/{topic}/partitions/{partition:010d}/"
        listed = self.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "records/")
        bases = sorted(int(o["Key"].rsplit("/", 1)[1][:20]) for o in listed.get("Contents", []))
        if offset not in bases:
            raise ValueError(f"{offset} is not the base offset of a batch in {bases}")
        for base in filter(drop, bases):
            self.client.delete_object(Bucket=BUCKET, Key=f"{prefix}records/{base:020d}.batch")
        self._update(prefix + "watermark.json", lambda w: w.update(watermark))
        # the listing shows it at once, the watermark once Tansu's cached copy is stale
        time.sleep(TANSU_READ_CACHE_S + 0.5)

    def add_partitions(self, topic: str, total: int) -> None:
        """What CreatePartitions does: the topic now has ``total`` partitions."""

        def grow(meta: dict[str, Any]) -> None:
            described = meta["topics"][topic]["topic"]
            if total <= described["num_partitions"]:
                raise ValueError(f"{topic} has {described['num_partitions']} partitions already")
            described["num_partitions"] = total

        self._update(f"{self.root}/meta.json", grow)
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        deadline = time.monotonic() + 30
        while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) != total:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Tansu did not show {topic} with {total} partitions")
            time.sleep(0.5)

    def _update(self, key: str, change: Any) -> None:
        """Read, change and write back only if the broker did not write in between."""
        got = self.client.get_object(Bucket=BUCKET, Key=key)
        document = json.loads(got["Body"].read())
        change(document)
        self.client.put_object(
            Bucket=BUCKET, Key=key, Body=json.dumps(document).encode(), IfMatch=got["ETag"]
        )
