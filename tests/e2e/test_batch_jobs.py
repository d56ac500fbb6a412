"""The Spark jobs on a real local Spark session against a real broker, Postgres and proxy:
inject each kind of drift, find exactly it, repair it with --apply so that a share consumer
afterwards neither stalls nor re-reads acknowledged records, and report clean on a second run;
the poison report lists exactly the records driven past the delivery limit."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from shareproxy.batch.runtime import lend_session, spark_session
from shareproxy.cli.batch import run_job
from tests.support.consumers import poll_until, share_consumer


@pytest.fixture(scope="module", autouse=True)
def spark():
    """One local Spark session for the module's jobs, as a driver that runs several jobs
    lends them: starting one takes seconds. Each job leaves it running."""
    session = spark_session("shareproxy-tests", "local[2]")
    try:
        with lend_session(session):
            yield session
        assert session.sparkContext._jsc is not None, "a job stopped the session it was lent"
    finally:
        session.stop()


def job(name: str, proxy, broker, tmp_path, *extra: str) -> tuple[int, dict]:
    """Run a batch job on local[2] against the proxy's store; its exit code and JSON output."""
    out = tmp_path / f"{name}-{uuid.uuid4().hex[:6]}.json"
    code = run_job(
        name,
        [
            "--state-url",
            proxy.state_url,
            "--bootstrap-servers",
            broker.bootstrap,
            "--master",
            "local[2]",
            "--output",
            str(out),
            *extra,
        ],
    )
    return code, json.loads(out.read_text())


def reconcile(proxy, broker, tmp_path, *extra: str) -> tuple[int, dict]:
    return job("reconcile", proxy, broker, tmp_path, *extra)


def drifts(document: dict) -> list[tuple[str, str | None, int | None]]:
    return sorted(
        (f["drift"], f["topic"], f["partition"])
        for f in document["findings"]
        if f["drift"] != "healthy"
    )


def send(broker, topic: str, partition: int, count: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    failed: list[object] = []
    for i in range(start, start + count):
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=b"v",
            partition=partition,
            headers=[("n", str(i).encode())],
            on_delivery=lambda err, _msg: failed.append(err) if err else None,
        )
    assert p.flush(30) == 0
    assert not failed, failed


def consume_all(proxy, group: str, topics: list[str], want: int, timeout: float = 60) -> list:
    c = share_consumer(proxy, group)
    c.subscribe(topics)
    try:
        got = poll_until(c, want, timeout)
        extra = poll_until(c, 1, 3)  # nothing more arrives
        c.commit_sync()
    finally:
        c.close()
    return got + extra


def listed_groups(proxy) -> dict[str, str]:
    got = httpx.get(f"{proxy.admin_url}/v1/share-groups", timeout=10)
    got.raise_for_status()
    return {g["group_id"]: g["state"] for g in got.json()}


def set_config(proxy, group: str, **configs) -> None:
    httpx.put(
        f"{proxy.admin_url}/v1/share-groups/{group}/config",
        json={"configs": {k.replace("_", "."): v for k, v in configs.items()}},
        timeout=10,
    ).raise_for_status()


@pytest.mark.long
def test_a_recreated_topic_is_found_and_repaired(proxy, broker, topic, tmp_path):
    p = proxy()
    a, b = topic(1), topic(1)
    send(broker, a, 0, 10)
    send(broker, b, 0, 6)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert len(consume_all(p, group, [a, b], 16)) == 16

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.delete_topics([b]).values():
        f.result(30)
    time.sleep(1)
    # recreated with a second partition
    for f in admin.create_topics([NewTopic(b, 2, 1)]).values():
        f.result(30)
    send(broker, b, 0, 4, start=100)
    send(broker, b, 1, 3, start=200)
    send(broker, a, 0, 2, start=300)
    # from now on the group starts new state at the log end: without the repair, the records
    # just produced to the recreated topic would never be delivered
    set_config(p, group, share_auto_offset_reset="latest")

    code, found = reconcile(p, broker, tmp_path)
    assert code == 1
    assert drifts(found) == [
        ("new_partition", b, 0),
        ("new_partition", b, 1),
        ("topic_recreated", b, 0),
    ]
    assert all(f["outcome"] == "dry run" for f in found["findings"] if f["drift"] != "healthy")

    code, applied = reconcile(p, broker, tmp_path, "--apply")
    assert code == 1 and applied["applied"] is True
    assert drifts(applied) == drifts(found)  # the dry run changed nothing
    outcomes = [f["outcome"] for f in applied["findings"] if f["drift"] != "healthy"]
    assert all(o.startswith("repaired") for o in outcomes), outcomes
    code, after = reconcile(p, broker, tmp_path)
    assert (code, drifts(after)) == (0, [])
    assert after["summary"] == {"healthy": 3}

    got = consume_all(p, group, [a, b], 9)
    assert sorted((m.topic(), m.key().decode()) for m in got) == sorted(
        [(b, f"k{i}") for i in (*range(100, 104), *range(200, 203))] + [(a, "k300"), (a, "k301")]
    )


@pytest.mark.long
def test_records_deleted_below_the_spso_are_counted_and_skipped(
    s3_proxy, s3_broker, s3_objects, s3_topic, tmp_path
):
    p, t = s3_proxy(), s3_topic(1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    send(s3_broker, t, 0, 3)
    assert len(consume_all(p, group, [t], 3)) == 3  # acknowledged: the SPSO is 3
    send(s3_broker, t, 0, 4, start=3)  # never delivered
    send(s3_broker, t, 0, 3, start=7)  # a batch of its own, from offset 7
    s3_objects.delete_records_before(t, 0, 7)  # retention: the log now starts at 7

    code, found = reconcile(p, s3_broker, tmp_path)
    assert (code, drifts(found)) == (1, [("records_lost", t, 0)])
    [lost] = [f for f in found["findings"] if f["drift"] == "records_lost"]
    assert (lost["spso"], lost["log_start"], lost["records"]) == (3, 7, 4)

    code, applied = reconcile(p, s3_broker, tmp_path, "--apply")
    assert drifts(applied) == drifts(found)  # the dry run changed nothing
    [repaired] = [f for f in applied["findings"] if f["drift"] == "records_lost"]
    assert repaired["outcome"].startswith("repaired"), repaired
    code, after = reconcile(p, s3_broker, tmp_path)
    assert (code, drifts(after)) == (0, [])
    [healthy] = after["findings"]
    assert (healthy["spso"], healthy["log_start"]) == (7, 7)

    # the running proxy held the old state: its next write is fenced, it reloads, and the
    # group goes on from the new log start, acknowledged records not read again
    send(s3_broker, t, 0, 2, start=10)
    got = consume_all(p, group, [t], 5)
    assert sorted(m.offset() for m in got) == [7, 8, 9, 10, 11]
    assert [m.key().decode() for m in sorted(got, key=lambda m: m.offset())] == [
        f"k{i}" for i in range(7, 12)
    ]


@pytest.mark.long
def test_a_truncated_log_is_found_and_a_live_group_goes_on_from_its_end(
    s3_proxy, s3_broker, s3_objects, s3_topic, tmp_path
):
    p, t = s3_proxy(), s3_topic(1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    send(s3_broker, t, 0, 6)
    send(s3_broker, t, 0, 4, start=6)  # a batch of its own, from offset 6
    c = share_consumer(p, group)
    c.subscribe([t])
    try:
        assert len(poll_until(c, 10, 60)) == 10
        c.commit_sync()  # acknowledged: the SPSO is 10
        s3_objects.truncate(t, 0, 6)  # the log now ends at 6: the group's state is past it

        code, found = reconcile(p, s3_broker, tmp_path)
        assert (code, drifts(found)) == (1, [("beyond_high_watermark", t, 0)])
        [beyond] = found["findings"]
        assert (beyond["spso"], beyond["high_watermark"]) == (10, 6)
        code, applied = reconcile(p, s3_broker, tmp_path, "--apply")
        assert applied["findings"][0]["outcome"].startswith("repaired"), applied
        code, after = reconcile(p, s3_broker, tmp_path)
        assert (code, drifts(after)) == (0, [])
        assert after["findings"][0]["spso"] == 6

        # the running proxy notices its leader's state was replaced and reloads it; without
        # that it would wait for offset 10 and these three records would never arrive
        send(s3_broker, t, 0, 3, start=20)  # offsets 6, 7, 8
        got = poll_until(c, 3, 30)
        assert sorted((m.offset(), m.key().decode()) for m in got) == [
            (6, "k20"),
            (7, "k21"),
            (8, "k22"),
        ]
    finally:
        c.close()


@pytest.mark.long
def test_an_added_partition_is_found_and_initialized(
    s3_proxy, s3_broker, s3_objects, s3_topic, tmp_path
):
    p, t = s3_proxy(), s3_topic(1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    send(s3_broker, t, 0, 4)
    assert len(consume_all(p, group, [t], 4)) == 4
    # from now on the group starts new state at the log end: without the repair, the records
    # produced to the new partition before a member comes back would never be delivered
    set_config(p, group, share_auto_offset_reset="latest")
    s3_objects.add_partitions(t, 2)
    send(s3_broker, t, 1, 3, start=100)
    send(s3_broker, t, 0, 2, start=200)

    code, found = reconcile(p, s3_broker, tmp_path)
    assert (code, drifts(found)) == (1, [("new_partition", t, 1)])
    code, applied = reconcile(p, s3_broker, tmp_path, "--apply")
    [repaired] = [f for f in applied["findings"] if f["drift"] == "new_partition"]
    assert repaired["outcome"].startswith("repaired"), repaired
    code, after = reconcile(p, s3_broker, tmp_path)
    assert (code, drifts(after)) == (0, [])
    assert sorted((f["partition"], f["spso"]) for f in after["findings"]) == [(0, 4), (1, 0)]

    got = consume_all(p, group, [t], 5)
    assert sorted((m.partition(), m.key().decode()) for m in got) == [
        (0, "k200"),
        (0, "k201"),
        (1, "k100"),
        (1, "k101"),
        (1, "k102"),
    ]


@pytest.mark.long
def test_an_expired_group_and_a_dropped_topic_are_found_and_repaired(
    proxy, broker, topic, tmp_path
):
    p = proxy()
    c_topic, d_topic = topic(1), topic(1)
    send(broker, c_topic, 0, 5)
    send(broker, d_topic, 0, 5)
    live, gone = f"live-{uuid.uuid4().hex[:6]}", f"gone-{uuid.uuid4().hex[:6]}"
    assert len(consume_all(p, gone, [c_topic], 5)) == 5  # then empty: its consumer closed
    c = share_consumer(p, live)
    c.subscribe([c_topic, d_topic])
    try:
        assert len(poll_until(c, 10, 60)) == 10
        c.commit_sync()
        c.unsubscribe()
        c.subscribe([c_topic])  # the live group drops d_topic
        poll_until(c, 1, 5)
        time.sleep(2)
        code, found = reconcile(p, broker, tmp_path, "--retention", "1s")
        assert code == 1
        assert sorted((f["group_id"], f["drift"], f["topic"]) for f in found["findings"]) == sorted(
            [
                (gone, "group_expired", c_topic),
                (live, "healthy", c_topic),
                (live, "unsubscribed_topic", d_topic),
            ]
        )
        assert (
            reconcile(p, broker, tmp_path)[0] == 0
        )  # no retention set: nothing expires, as in Kafka
        code, applied = reconcile(p, broker, tmp_path, "--retention", "1s", "--apply")
        assert all(
            f["outcome"].startswith("repaired")
            for f in applied["findings"]
            if f["drift"] != "healthy"
        )
        code, after = reconcile(p, broker, tmp_path, "--retention", "1s")
        assert (code, [(f["group_id"], f["topic"]) for f in after["findings"]]) == (
            0,
            [(live, c_topic)],
        )
        # the running proxy stops listing the deleted group within its 5 s check
        deadline = time.monotonic() + 20
        while gone in listed_groups(p) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert listed_groups(p) == {live: "Stable"}
        send(broker, c_topic, 0, 2, start=50)
        got = poll_until(c, 2, 30)
        assert sorted(m.key().decode() for m in got) == ["k50", "k51"]  # nothing acked again
    finally:
        c.close()


@pytest.mark.floors
def test_the_poison_report_lists_exactly_the_records_past_the_delivery_limit(
    proxy, broker, topic, tmp_path, capsys
):
    p = proxy()
    t = topic(1)
    send(broker, t, 0, 12)
    group = f"poison-report-for-a-team-that-names-its-groups-at-length-{uuid.uuid4().hex}"
    set_config(p, group, share_delivery_count_limit=2)
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    poisoned = {2, 5, 9}
    rejected = {7}
    try:
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in poll_until(c, 1, 5):
                o = m.offset()
                seen[o] = seen.get(o, 0) + 1
                kind = (
                    AcknowledgeType.RELEASE
                    if o in poisoned
                    else AcknowledgeType.REJECT
                    if o in rejected
                    else AcknowledgeType.ACCEPT
                )
                c.acknowledge(m, kind)
            c.commit_sync()
            if len(seen) == 12 and all(seen[o] == 2 for o in poisoned):
                break
        assert all(seen.get(o) == 2 for o in poisoned), seen
    finally:
        c.close()
    capsys.readouterr()
    code, report = job("report", p, broker, tmp_path)
    assert code == 0
    printed = capsys.readouterr().out  # not a terminal: the tables are complete, not 80 wide
    assert "…" not in printed and max(map(len, printed.splitlines())) > 100
    rows = [line for line in printed.splitlines() if group in line]
    assert len(rows) == 1 + 1 + 3, printed  # groups, lag, and a row per poison record
    assert all(t in row for row in rows[1:]), printed
    assert [
        (x["topic"], x["partition"], x["offset"], x["key"], x["headers"], x["delivery_count"])
        for x in report["poison"]
    ] == [(t, 0, o, f"k{o}", {"n": str(o)}, 2) for o in sorted(poisoned)]
    [g] = report["groups"]
    assert (g["group_id"], g["poison_records"], g["archived_records"], g["lag"]) == (group, 3, 4, 0)
    assert [(x["topic"], x["lag"]) for x in report["partitions"]] == [(t, 0)]


@pytest.mark.long
def test_the_same_job_file_runs_under_spark_submit(proxy, broker, topic, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pyspark

    p = proxy()
    t = topic(1)
    send(broker, t, 0, 3)
    group = f"reconciled-by-spark-submit-with-a-long-descriptive-name-{uuid.uuid4().hex}"
    assert len(consume_all(p, group, [t], 3)) == 3
    out = tmp_path / "findings.json"
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    job = Path(__file__).resolve().parents[2] / "spark" / "reconcile.py"
    run = subprocess.run(
        [
            str(submit),
            "--master",
            "local[1]",
            str(job),
            "--state-url",
            p.state_url,
            "--bootstrap-servers",
            broker.bootstrap,
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        },
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    findings = json.loads(out.read_text())
    assert findings["summary"] == {"healthy": 1}
    assert "share-partitions: 1 healthy, 0 drifted" in run.stdout
    # stdout is a pipe: the table row is whole, and says what the JSON says
    [row] = [line for line in run.stdout.splitlines() if group in line]
    [found] = findings["findings"]
    assert all(str(found[k]) in row for k in ("drift", "group_id", "topic", "spso")), row


@pytest.mark.floors
def test_bad_input_gets_a_clear_message_and_exit_code(tmp_path, capsys):
    assert run_job("reconcile", ["--retention", "soon"]) == 2
    assert "not a duration" in capsys.readouterr().err
    missing = f"sqlite:///{tmp_path}/nothing-here/state.db"
    assert run_job("reconcile", ["--state-url", missing, "--master", "local[1]"]) == 3
    said = capsys.readouterr().err
    assert "reconcile failed:" in said and "nothing-here does not exist" in said
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    assert run_job("report", ["--state-url", unreachable, "--master", "local[1]"]) == 3
    assert "report failed:" in capsys.readouterr().err


@pytest.mark.floors
def test_without_java_the_jobs_say_what_to_install(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # nothing there: no java
    run = subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "report", "--state-url", "sqlite://"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "the Spark jobs need Java 17" in run.stderr and "Traceback" not in run.stderr
