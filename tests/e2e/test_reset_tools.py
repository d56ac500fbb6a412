"""Resetting and deleting like Kafka's tools (kafka-share-groups.sh --reset-offsets with
kafka-consumer-groups.sh's --shift-by and --by-duration, --topic t:0, --export and --from-file;
--delete of several groups), through the CLI and REST against a running proxy, a real broker,
real Postgres and real ShareConsumers."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from tests.support.admin_api import api, cli
from tests.support.consumers import accept_all, poll_until, share_consumer, wait_for


def _consumed_then_empty(p, t: str, count: int, group: str | None = None) -> str:
    """A group that consumed ``count`` records of ``t`` and has no members now."""
    group = group or f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    try:
        assert len(accept_all(c, count)) == count
    finally:
        c.close()
    with api(p) as http:
        wait_for(lambda: http.get(f"/v1/share-groups/{group}").json()["state"] == "Empty")
    return group


def _received(p, group: str, t: str, want: int) -> list[tuple[int, int]]:
    """(partition, offset) of what a new member of ``group`` receives, waiting past ``want``
    a little to see nothing more comes."""
    c = share_consumer(p, group)
    c.subscribe([t])
    try:
        got = accept_all(c, want)
        got += poll_until(c, 1, 3)  # nothing beyond
        return sorted((m.partition(), m.offset()) for m in got)
    finally:
        c.close()


@pytest.mark.long
def test_shift_by_minus_five_redelivers_exactly_the_five_before(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 20, partitions=1)
    group = _consumed_then_empty(p, t, 20)
    done = cli(p, "reset-offsets", group, "--topic", t, "--shift-by", "-5", "--execute")
    assert done.returncode == 0, done.stderr
    assert _received(p, group, t, 5) == [(0, o) for o in range(15, 20)]
    # shifted past the log's start: the start, as Kafka clamps it
    plan = cli(p, "reset-offsets", group, "--all-topics", "--shift-by", "-1000", "--export")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout == f"{t},0,0\n"


@pytest.mark.long
def test_by_duration_starts_at_the_records_of_the_last_moments(proxy, broker, topic):
    p = proxy()
    t = topic(1)
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):  # stamped an hour ago, as a producer may stamp them
        producer.produce(t, b"old%d" % i, partition=0, timestamp=hour_ago + i)
    for i in range(6):
        producer.produce(t, b"new%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = _consumed_then_empty(p, t, 16)
    done = cli(p, "reset-offsets", group, "--by-duration", "PT10M", "--execute")
    assert done.returncode == 0, done.stderr
    assert _received(p, group, t, 6) == [(0, o) for o in range(10, 16)]
    with api(p) as http:
        bad = http.post(
            f"/v1/share-groups/{group}/offsets/reset", json={"to": "duration", "duration": "1h"}
        )
        assert bad.status_code == 422 and "ISO-8601" in bad.json()["message"], bad.text
    assert cli(p, "reset-offsets", group, "--by-duration", "soon").returncode == 1


@pytest.mark.long
def test_a_time_later_than_every_record_never_rewinds_to_the_start(proxy, broker, topic):
    """Tansu answers ListOffsets for any time with offset 0 (Kafka: none past every record, else
    the first record stamped at or after it). The proxy checks the answer against the records'
    timestamps, so a reset by duration lands where Kafka's would: at the end, never at the
    start, and between two records at the later one."""
    p = proxy()
    t = topic(1)
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(t, b"v%d" % i, partition=0, timestamp=hour_ago + i * 60_000)
    assert producer.flush(30) == 0
    group = _consumed_then_empty(p, t, 5)
    recent = cli(p, "reset-offsets", group, "--all-topics", "--by-duration", "PT5S", "--export")
    assert recent.returncode == 0, recent.stderr
    assert recent.stdout == f"{t},0,5\n"
    older = cli(p, "reset-offsets", group, "--all-topics", "--by-duration", "PT2H", "--export")
    assert older.returncode == 0, older.stderr
    assert older.stdout == f"{t},0,0\n"
    # between the third and the fourth record (a minute apart): the fourth, offset 3
    since = int(time.time() * 1000) - (hour_ago + 150_000)
    between = cli(
        p,
        "reset-offsets",
        group,
        "--all-topics",
        "--by-duration",
        f"PT{since / 1000:.3f}S",
        "--export",
    )
    assert between.returncode == 0, between.stderr
    assert between.stdout == f"{t},0,3\n"


def test_topic_colon_partition_resets_that_partition_alone(proxy, topic, produce):
    p = proxy()
    t = topic(2)
    produce(t, 20, partitions=2)
    group = _consumed_then_empty(p, t, 20)
    done = cli(p, "reset-offsets", group, "--topic", f"{t}:0", "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    assert _received(p, group, t, 10) == [(0, o) for o in range(10)]
    with api(p) as http:
        url = f"/v1/share-groups/{group}/offsets/reset"
        out_of_range = http.post(url, json={"to": "current", "topics": [f"{t}:0,7"]})
        assert out_of_range.status_code == 404, out_of_range.text
        assert out_of_range.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
        assert f"{t}-7" in out_of_range.json()["message"]
        unknown = http.post(url, json={"to": "earliest", "topics": ["no-such-topic"]})
        assert unknown.status_code == 404, unknown.text
        bad_scope = http.post(url, json={"to": "earliest", "topics": [f"{t}:x"]})
        assert bad_scope.status_code == 422, bad_scope.text
        current = http.post(url, json={"to": "current", "topics": [t]}).json()
        assert [(s["partition"], s["new_start_offset"]) for s in current["partitions"]] == [
            (0, 10),
            (1, 10),
        ]
    both = cli(p, "reset-offsets", group, "--topic", t, "--all-topics", "--to-earliest")
    assert both.returncode == 2


@pytest.mark.long
def test_export_then_from_file_applies_the_same_plan(proxy, topic, produce, tmp_path):
    p = proxy()
    t = topic(2)
    produce(t, 30, partitions=2)
    group = _consumed_then_empty(p, t, 30)
    exported = cli(p, "reset-offsets", group, "--all-topics", "--shift-by", "-3", "--export")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == f"{t},0,12\n{t},1,12\n"
    with api(p) as http:
        offsets = f"/v1/share-groups/{group}/offsets"
        assert [x["start_offset"] for x in http.get(offsets).json()["partitions"]] == [15, 15]
        plan = tmp_path / "plan.csv"
        plan.write_text(exported.stdout)
        done = cli(p, "reset-offsets", group, "--from-file", str(plan), "--execute")
        assert done.returncode == 0, done.stderr
        assert [x["start_offset"] for x in http.get(offsets).json()["partitions"]] == [12, 12]
        # a plan from kafka-consumer-groups.sh for several groups: this group's lines apply
        plan.write_text(f"other,{t},0,1\n{group},{t},1,0\n")
        done = cli(p, "reset-offsets", group, "--from-file", str(plan), "--execute")
        assert done.returncode == 0, done.stderr
        assert [x["start_offset"] for x in http.get(offsets).json()["partitions"]] == [12, 0]
    plan.write_text("nonsense\n")
    refused = cli(p, "reset-offsets", group, "--from-file", str(plan), "--execute")
    assert refused.returncode == 2 and "line 1" in refused.stderr
    assert _received(p, group, t, 18) == [(0, o) for o in range(12, 15)] + [
        (1, o) for o in range(15)
    ]


def test_delete_several_groups_reports_each_and_fails_naming_the_missing(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 4, partitions=1)
    a = _consumed_then_empty(p, t, 4)
    b = _consumed_then_empty(p, t, 4, group=f"g-{uuid.uuid4().hex[:6]}")
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    done = cli(p, "delete", a, b, missing)
    assert done.returncode == 1, done.stdout
    assert missing in done.stderr and "GROUP_ID_NOT_FOUND" in done.stderr
    assert a not in done.stderr and b not in done.stderr
    assert f"deleted share groups {a}, {b}" in done.stdout
    with api(p) as http:
        for g in (a, b):
            assert http.get(f"/v1/share-groups/{g}").status_code == 404
