"""Managing share groups over REST and the CLI, against a running proxy with a real broker, real
Postgres and real ShareConsumers."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import AcknowledgeType

from tests.support.admin_api import api, cli
from tests.support.consumers import accept_all, poll_until, share_consumer, wait_for


@pytest.mark.long
def test_list_describe_and_lag_falling_to_zero(proxy, topic, produce):
    p = proxy()
    t = topic(3)
    produce(t, 300)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    try:
        first = poll_until(c, 1, 30)
        assert first
        with api(p) as http:
            listed = http.get("/v1/share-groups").json()
            assert {"group_id": group, "state": "Stable"} in [
                {k: g[k] for k in ("group_id", "state")} for g in listed
            ]
            assert http.get("/v1/share-groups", params={"state": "empty"}).json() == [
                g for g in listed if g["state"] == "Empty"
            ]
            detail = http.get(f"/v1/share-groups/{group}").json()
            assert detail["state"] == "Stable" and len(detail["members"]) == 1
            member = detail["members"][0]
            assert member["subscriptions"] == [t]
            assert member["assignment"] == {t: [0, 1, 2]}
            assert member["host"] == "127.0.0.1"
            heard = datetime.fromisoformat(member["last_heartbeat"])
            assert abs(datetime.now(UTC) - heard) < timedelta(seconds=30)
            assert "last_heartbeat_age_seconds" not in member  # it would differ call to call
            lag_before = http.get(f"/v1/share-groups/{group}/offsets").json()["total_lag"]
            assert 0 < lag_before <= 300
            got = len(first) + len(accept_all(c, 300 - len(first)))
            assert got == 300

            def settled():
                o = http.get(f"/v1/share-groups/{group}/offsets").json()
                return o if o["total_lag"] == 0 else None

            offsets = wait_for(settled, 30, "lag 0")
            assert sorted(x["partition"] for x in offsets["partitions"]) == [0, 1, 2]
            assert all(x["high_watermark"] == 100 for x in offsets["partitions"])
        described = json.loads(cli(p, "describe", group, "--output", "json").stdout)
        assert described["members"][0]["member_id"] == member["member_id"]
        shown = cli(p, "describe", group)
        assert shown.returncode == 0 and "HEARTBEAT" in shown.stdout, shown.stdout
        assert " s ago" in shown.stdout, shown.stdout
        table = cli(p, "offsets", group)
        assert table.returncode == 0 and "total lag: 0" in table.stdout
    finally:
        c.close()


@pytest.mark.long
def test_reset_refused_with_members_then_earliest_rereads_everything(proxy, topic, produce):
    p = proxy()
    t = topic(2)
    produce(t, 100, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    assert len(accept_all(c, 100)) == 100
    with api(p) as http:
        before = http.get(f"/v1/share-groups/{group}/offsets").json()
        refused = http.post(
            f"/v1/share-groups/{group}/offsets/reset", json={"to": "earliest", "dry_run": False}
        )
        assert refused.status_code == 409
        assert refused.json()["error_code"] == "NON_EMPTY_GROUP"
        assert http.get(f"/v1/share-groups/{group}/offsets").json() == before
        c.close()
        wait_for(
            lambda: http.get(f"/v1/share-groups/{group}").json()["state"] == "Empty",
            30,
            "the group to empty",
        )
        plan = cli(p, "reset-offsets", group, "--to-earliest", "--output", "json")
        assert plan.returncode == 0, plan.stderr
        steps = json.loads(plan.stdout)["partitions"]
        moves = {(s["partition"], s["current_start_offset"], s["new_start_offset"]) for s in steps}
        assert moves == {(0, 50, 0), (1, 50, 0)}
        assert http.get(f"/v1/share-groups/{group}/offsets").json() == before  # dry run
        done = cli(p, "reset-offsets", group, "--to-earliest", "--execute")
        assert done.returncode == 0, done.stderr
    again = share_consumer(p, group)
    again.subscribe([t])
    try:
        reread = accept_all(again, 100)
        assert sorted((m.partition(), m.offset()) for m in reread) == sorted(
            (part, off) for part in range(2) for off in range(50)
        )
        assert all(m.delivery_count() == 1 for m in reread)
    finally:
        again.close()


@pytest.mark.long
def test_delete_offsets_refused_while_subscribed_and_done_after(proxy, topic, produce):
    p = proxy()
    t1, t2 = topic(1), topic(1)
    produce(t1, 10, partitions=1)
    produce(t2, 10, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t1])
    try:
        assert len(accept_all(c, 10)) == 10
        with api(p) as http:
            refused = http.delete(f"/v1/share-groups/{group}/offsets", params={"topic": t1})
            assert refused.status_code == 409
            assert refused.json()["error_code"] == "GROUP_SUBSCRIBED_TO_TOPIC"
            assert [
                x["topic"]
                for x in http.get(f"/v1/share-groups/{group}/offsets").json()["partitions"]
            ] == [t1]
            c.subscribe([t2])  # the next heartbeat carries the new subscription
            assert len(accept_all(c, 10)) == 10

            def unsubscribed():
                members = http.get(f"/v1/share-groups/{group}").json()["members"]
                return members and members[0]["subscriptions"] == [t2]

            wait_for(unsubscribed, 30, "the subscription change")
            deleted = cli(p, "delete-offsets", group, "--topic", t1)
            assert deleted.returncode == 0, deleted.stderr
            topics = {
                x["topic"]
                for x in http.get(f"/v1/share-groups/{group}/offsets").json()["partitions"]
            }
            assert topics == {t2}
    finally:
        c.close()


@pytest.mark.long
def test_lock_duration_change_applies_without_restart(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with api(p) as http:
        bad = http.put(
            f"/v1/share-groups/{group}/config",
            json={
                "configs": {"share.record.lock.duration.ms": 10, "share.delivery.count.limit": 3}
            },
        )
        assert bad.status_code == 422 and bad.json()["error_code"] == "INVALID_CONFIG"
        assert http.get(f"/v1/share-groups/{group}/config").status_code == 404  # nothing stored
        ok = http.put(
            f"/v1/share-groups/{group}/config",
            json={"configs": {"share.record.lock.duration.ms": 2000}},
        )
        assert ok.status_code == 200
        entry = ok.json()["configs"]["share.record.lock.duration.ms"]
        assert (entry["value"], entry["source"]) == ("2000", "group")
        shown = cli(p, "config", group)
        assert shown.returncode == 0 and "2000" in shown.stdout
    produce(t, 5, partitions=1)
    holder = share_consumer(p, group, mode="explicit")
    holder.subscribe([t])
    held = poll_until(holder, 5, 30)
    assert len(held) == 5
    taken_at = time.monotonic()
    other = share_consumer(p, group)
    other.subscribe([t])
    try:
        redelivered = poll_until(other, 5, 20)
        waited = time.monotonic() - taken_at
        assert sorted(m.offset() for m in redelivered) == [0, 1, 2, 3, 4]
        assert all(m.delivery_count() == 2 for m in redelivered)
        assert waited < 15, f"redelivered after {waited:.1f}s: the 30 s default was used"
        other.commit_sync()
    finally:
        other.close()
        holder.close()


@pytest.mark.floors
def test_http_consumption_shares_a_group_with_kafka_consumers(proxy, topic, produce):
    p = proxy()
    t = topic(3)
    produce(t, 600)
    group = f"g-{uuid.uuid4().hex[:6]}"
    http_offsets: list[tuple[int, int]] = []
    kafka_offsets: list[tuple[int, int]] = []
    stop = threading.Event()

    def kafka_side() -> None:
        c = share_consumer(p, group)
        c.subscribe([t])
        while not stop.is_set():
            msgs = c.poll(0.3) or []
            kafka_offsets.extend((m.partition(), m.offset()) for m in msgs if m.error() is None)
        c.commit_sync()
        c.close()

    thread = threading.Thread(target=kafka_side)
    with api(p) as http:

        def fetch() -> list[dict]:
            r = http.post(
                f"/v1/share-groups/{group}/records/fetch",
                json={
                    "topics": [t],
                    "consumer_id": "http-1",
                    "max_records": 50,
                    "max_wait_ms": 200,
                },
            )
            assert r.status_code == 200, r.text
            records = r.json()["records"]
            assert all(rec["delivery_count"] == 1 for rec in records)
            assert all(rec["value"] == "v" * 100 for rec in records)
            assert all(rec["lock_expires_at_ms"] > time.time() * 1000 for rec in records)
            http_offsets.extend((rec["partition"], rec["offset"]) for rec in records)
            return records

        def accept(records: list[dict]) -> None:
            acks = [
                {
                    "topic": t,
                    "partition": rec["partition"],
                    "first_offset": rec["offset"],
                    "last_offset": rec["offset"],
                    "type": "accept",
                }
                for rec in records
            ]
            done = http.post(
                f"/v1/share-groups/{group}/records/acknowledge",
                json={"consumer_id": "http-1", "acknowledgements": acks},
            )
            assert done.status_code == 200
            assert all(x["error_code"] is None for x in done.json()["results"]), done.json()

        held = fetch()  # held, unacknowledged, while the Kafka consumer reads the rest
        assert len(held) == 50
        thread.start()
        wait_for(lambda: len(kafka_offsets) >= 550, 60, "the Kafka consumer")
        accept(held)
        deadline = time.monotonic() + 30
        while len(http_offsets) + len(kafka_offsets) < 600 and time.monotonic() < deadline:
            records = fetch()
            if records:
                accept(records)
    stop.set()
    thread.join(30)
    assert http_offsets and kafka_offsets, "both paths should have received records"
    assert not set(http_offsets) & set(kafka_offsets), "a record went to both"
    assert sorted(http_offsets + kafka_offsets) == sorted(
        (part, off) for part in range(3) for off in range(200)
    )
    with api(p) as http:  # a record settled already (below SPSO) is passed over, as on Kafka
        r = http.post(
            f"/v1/share-groups/{group}/records/acknowledge",
            json={
                "consumer_id": "http-2",
                "acknowledgements": [
                    {
                        "topic": t,
                        "partition": 0,
                        "first_offset": 0,
                        "last_offset": 0,
                        "type": "accept",
                    }
                ],
            },
        )
        assert r.json()["results"][0]["error_code"] is None


@pytest.mark.long
def test_invalid_input_gets_clear_errors_and_changes_nothing(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 5, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    assert len(accept_all(c, 5)) == 5
    c.close()
    with api(p) as http:
        wait_for(lambda: http.get(f"/v1/share-groups/{group}").json()["state"] == "Empty")
        before = http.get(f"/v1/share-groups/{group}/offsets").json()
        unknown = http.get("/v1/share-groups/no-such-group")
        assert unknown.status_code == 404
        assert unknown.json()["error_code"] == "GROUP_ID_NOT_FOUND"
        assert http.get("/v1/share-groups/no-such-group/offsets").status_code == 404
        malformed = http.post(
            f"/v1/share-groups/{group}/offsets/reset",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert malformed.status_code == 400
        assert malformed.json()["error_code"] == "MALFORMED_JSON"
        future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        r = http.post(
            f"/v1/share-groups/{group}/offsets/reset",
            json={"to": "datetime", "datetime": future, "dry_run": False},
        )
        assert r.status_code == 422 and "future" in r.json()["message"]
        r = http.post(f"/v1/share-groups/{group}/offsets/reset", json={"to": "yesterday"})
        assert r.status_code == 422 and r.json()["error_code"] == "INVALID_REQUEST"
        r = http.put(
            f"/v1/share-groups/{group}/config",
            json={"configs": {"share.isolation.level": "read_committed", "share.nope": "1"}},
        )
        assert r.status_code == 422 and "share.nope" in r.json()["message"]
        r = http.put(
            f"/v1/share-groups/{group}/config",
            json={"configs": {"share.heartbeat.interval.ms": 60_000}},  # above the 45 s timeout
        )
        assert r.status_code == 422
        config = http.get(f"/v1/share-groups/{group}/config").json()["configs"]
        assert all(entry["source"] == "default" for entry in config.values())
        assert http.get(f"/v1/share-groups/{group}/offsets").json() == before
        assert http.get("/openapi.json").status_code == 200
    bad = cli(p, "describe", "no-such-group")
    assert bad.returncode == 1 and "GROUP_ID_NOT_FOUND" in bad.stderr
    assert cli(p, "reset-offsets", group).returncode == 2  # no --to-… given
    deleted = cli(p, "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    assert cli(p, "describe", group).returncode == 1


def test_nodes_lists_this_node_with_what_it_serves(proxy, topic, produce):
    p = proxy()
    t = topic(2)
    produce(t, 4, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    c.subscribe([t])
    try:
        assert poll_until(c, 1, 30)
        with api(p) as http:
            answer = http.get("/v1/nodes")
            assert answer.status_code == 200, answer.text
            listed = answer.json()
        assert listed["unreached"] == []
        (node,) = listed["nodes"]
        assert node["node_id"] == listed["node_id"]
        assert node["lease_live"] is True
        assert node["admin_url"].endswith(f":{p.admin_port}")
        assert list(node["listeners"].values()) == [p.bootstrap]
        assert datetime.fromisoformat(node["lease_expires_at"]) > datetime.now(UTC)
        assert node["groups_coordinated"] >= 1  # the group above, and any others stored
        assert node["share_partitions_led"] >= 2  # its two share-partitions, loaded here
    finally:
        c.close()


@pytest.mark.floors
def test_group_stats_count_deliveries_redeliveries_timeouts_and_archived(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 6, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with api(p) as http:
        assert http.get(f"/v1/share-groups/{group}/stats").status_code == 404
        http.put(
            f"/v1/share-groups/{group}/config",
            json={"configs": {"share.record.lock.duration.ms": 1000}},
        ).raise_for_status()
        c = share_consumer(p, group, mode="explicit")
        c.subscribe([t])
        try:
            got = poll_until(c, 6, 30)
            assert len(got) == 6
            for m in got:  # offsets 0-1 released, 2 rejected, the rest accepted
                kind = {0: "RELEASE", 1: "RELEASE", 2: "REJECT"}.get(m.offset(), "ACCEPT")
                c.acknowledge(m, getattr(AcknowledgeType, kind))
            c.commit_sync()
            assert len(poll_until(c, 2, 30)) == 2  # the released two, held until their locks end

            def counted():
                s = http.get(f"/v1/share-groups/{group}/stats").json()
                return s if s["lock_timeouts"] >= 2 else None

            stats = wait_for(counted, 20, "lock timeouts counted")
        finally:
            c.close()
    assert stats == {
        "group_id": group,
        "deliveries": 6,
        "redeliveries": 2,
        "lock_timeouts": 2,
        "archived": 1,
        "unreached": [],
    }
