"""Archived records without Spark: a librdkafka share consumer rejects records and lets one use
up its deliveries; the admin API lists them with why, and a redrive produces chosen ones back
to the source topic once, where the group consumes them again with headers naming their
origin. Bad requests are 4xx with a message; the ACLs are Read on the group and Write on the
topic."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer

from shareproxy.core import group_config as gc
from tests.support.consumers import poll_until, share_consumer
from tests.support.dead_letters import read_all
from tests.support.group_configs import alter_group_configs
from tests.support.secure import PASSWORDS


def produce_with_headers(bootstrap: str, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=0,
            headers=[("trace", f"t{i}".encode())],
        )
    assert p.flush(30) == 0


def records_in(bootstrap: str, topic: str, want: int) -> int:
    """How many records the topic holds, read from the start (waiting for ``want``)."""
    return len(read_all(bootstrap, topic, want, timeout=10))


def by_offset(listed: dict) -> dict[int, tuple[str, int, bool]]:
    """Each archived offset: (reason, delivery count, redriven)."""
    return {
        o: (a["reason"], a["delivery_count"], a["redriven_at"] is not None)
        for a in listed["archived"]
        for o in range(a["first_offset"], a["last_offset"] + 1)
    }


def cli(proxy, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "groups", *args, "--admin-url", proxy.admin_url],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.long
def test_archived_records_are_listed_with_why_and_redriven_once(proxy, topic, broker):
    source = topic(1)
    produce_with_headers(broker.bootstrap, source, 10)
    p = proxy(log_format="json")
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(p, group, {gc.DELIVERY_COUNT_LIMIT: "2"})
    api = httpx.Client(base_url=f"{p.admin_url}/v1/share-groups/{group}", timeout=30)
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([source])
    try:
        first = poll_until(c, 10, 30)
        assert sorted(m.offset() for m in first) == list(range(10))
        for m in first:
            kind = (
                AcknowledgeType.REJECT
                if m.offset() in (2, 5, 6)
                else AcknowledgeType.RELEASE
                if m.offset() == 8
                else AcknowledgeType.ACCEPT
            )
            c.acknowledge(m, kind)
        c.commit_sync()
        again = poll_until(c, 1, 30)  # offset 8 on its last delivery, released once more
        assert [(m.offset(), m.delivery_count()) for m in again] == [(8, 2)]
        c.acknowledge(again[0], AcknowledgeType.RELEASE)
        c.commit_sync()

        listed = api.get("/archived").json()
        assert by_offset(listed) == {
            2: ("rejected", 1, False),
            5: ("rejected", 1, False),
            6: ("rejected", 1, False),
            8: ("delivery-limit", 2, False),
        }
        assert {a["topic"] for a in listed["archived"]} == {source}
        assert all(a["first_record"] is None for a in listed["archived"])  # not asked for
        previewed = api.get("/archived", params={"preview": "true"}).json()["archived"]
        assert {a["first_offset"]: a["first_record"] for a in previewed} == {
            a["first_offset"]: {"key": f"k{a['first_offset']}", "value": f"v{a['first_offset']}"}
            for a in listed["archived"]
        }  # each range's first record, read back from the log
        page = api.get("/archived", params={"topic": source, "partition": 0, "limit": 1}).json()
        assert len(page["archived"]) == 1 and page["more"]
        rest = api.get(
            "/archived", params={"topic": source, "partition": 0, "from": page["next_from"]}
        ).json()
        assert by_offset(page) | by_offset(rest) == by_offset(listed)

        chosen = [
            {"topic": source, "partition": 0, "first_offset": 2, "last_offset": 2},
            {"topic": source, "partition": 0, "first_offset": 8, "last_offset": 8},
        ]
        dry = api.post("/archived/redrive", json={"records": chosen})
        assert dry.status_code == 200, dry.text
        assert (dry.json()["result"], dry.json()["records"]) == ("dry run", 2)
        assert records_in(broker.bootstrap, source, 10) == 10  # a dry run produces nothing

        done = api.post("/archived/redrive", json={"records": chosen, "dry_run": False})
        assert done.status_code == 200, done.text
        assert (done.json()["result"], done.json()["records"]) == ("redriven", 2)
        new = [
            o
            for part in done.json()["partitions"]
            for r in part["produced"]
            for o in r["new_offsets"]
        ]
        assert new == [10, 11]

        redriven = poll_until(c, 2, 30)  # the group gets them again, as new records
        assert sorted(m.offset() for m in redriven) == [10, 11]
        for m in redriven:
            h = {k: v.decode() for k, v in m.headers()}
            origin = int(h["__redrive.offset"])
            assert (m.key(), m.value(), h["trace"]) == (
                f"k{origin}".encode(),
                f"v{origin}".encode(),
                f"t{origin}",
            )
            assert (h["__redrive.topic"], h["__redrive.partition"], h["__redrive.group"]) == (
                source,
                "0",
                group,
            )
            assert int(h["__redrive.timestamp"]) > 0
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        assert {int(dict(m.headers())["__redrive.offset"]) for m in redriven} == {2, 8}
        c.commit_sync()

        second = api.post("/archived/redrive", json={"records": chosen, "dry_run": False})
        assert second.status_code == 200, second.text
        assert (second.json()["result"], second.json()["records"]) == ("already redriven", 0)
        assert [part["already_redriven"] for part in second.json()["partitions"]] == [
            [[2, 2]],
            [[8, 8]],
        ]
        assert records_in(broker.bootstrap, source, 12) == 12  # nothing produced again
        assert poll_until(c, 1, 3) == []
    finally:
        c.close()
    assert by_offset(api.get("/archived").json()) == {
        2: ("rejected", 1, True),
        5: ("rejected", 1, False),
        6: ("rejected", 1, False),
        8: ("delivery-limit", 2, True),
    }

    shown = cli(p, "archived", group, "--topic", source)
    assert shown.returncode == 0, shown.stderr
    assert "delivery-limit" in shown.stdout and "rejected" in shown.stdout
    planned = cli(p, "redrive", group, "--topic", source, "--partition", "0", "--offsets", "5-6")
    assert planned.returncode == 0, planned.stderr
    assert "dry run: 2 records would be redriven" in planned.stdout
    refused = cli(p, "redrive", group, "--topic", source, "--partition", "0", "--offsets", "0-2")
    assert refused.returncode == 1
    assert "INVALID_RECORD_STATE" in refused.stderr and "0-1" in refused.stderr

    audit = [
        json.loads(x)
        for x in p.log().splitlines()
        if x.startswith("{") and '"shareproxy.audit"' in x and "redrive" in x
    ]
    assert [(e["group"], e["result"]) for e in audit] == [
        (group, "dry run"),
        (group, "redriven"),
        (group, "already redriven"),
        (group, "dry run"),
    ]
    assert f"{source}-0 redrive - already 2" in audit[2]["message"]


def test_bad_redrives_are_4xx_with_a_message(proxy, topic, broker):
    source = topic(1)
    produce_with_headers(broker.bootstrap, source, 3)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(p, group, {gc.DELIVERY_COUNT_LIMIT: "2"})
    base = f"{p.admin_url}/v1/share-groups"

    def redrive(g: str, *records: dict) -> httpx.Response:
        return httpx.post(
            f"{base}/{g}/archived/redrive", json={"records": list(records)}, timeout=30
        )

    one = {"topic": source, "partition": 0, "first_offset": 0, "last_offset": 1}
    cases = [
        (redrive("no-such-group", one), 404, "GROUP_ID_NOT_FOUND"),
        (redrive(group, {**one, "topic": "no-such-topic"}), 404, "UNKNOWN_TOPIC_OR_PARTITION"),
        (redrive(group, {**one, "partition": 4}), 404, "UNKNOWN_TOPIC_OR_PARTITION"),
        (redrive(group, one), 409, "INVALID_RECORD_STATE"),  # nothing archived there
        (redrive(group, {"topic": source, "partition": 0}), 409, "INVALID_RECORD_STATE"),
        (redrive(group, {**one, "first_offset": 3}), 422, "INVALID_REQUEST"),
        (
            redrive(group, {"topic": source, "partition": 0, "first_offset": 1}),
            422,
            "INVALID_REQUEST",
        ),
        (redrive(group), 422, None),
        (
            httpx.get(f"{base}/{group}/archived", params={"partition": 0}, timeout=30),
            422,
            "INVALID_REQUEST",
        ),
        (httpx.get(f"{base}/{group}/archived", params={"limit": 0}, timeout=30), 422, None),
        (httpx.get(f"{base}/no-such-group/archived", timeout=30), 404, "GROUP_ID_NOT_FOUND"),
    ]
    for response, status, code in cases:
        assert response.status_code == status, response.text
        if code is not None:
            assert response.json()["error_code"] == code and response.json()["message"]
    assert "Traceback" not in p.log()
    assert records_in(broker.bootstrap, source, 3) == 3


@pytest.mark.long
def test_a_redrive_needs_read_on_the_group_and_write_on_the_topic(secure, topic):
    source = topic(1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with secure.http() as admin:
        put = admin.put(
            f"/v1/share-groups/{group}/config", json={"configs": {gc.DELIVERY_COUNT_LIMIT: 3}}
        )
        assert put.status_code == 200, put.text
    body = {"records": [{"topic": source, "partition": 0}]}
    path = f"/v1/share-groups/{group}/archived"
    with secure.http("bob", PASSWORDS["bob"]) as bob:
        assert bob.get(path).status_code == 403
        denied = bob.post(f"{path}/redrive", json=body)
        assert (denied.status_code, denied.json()["error_code"]) == (
            403,
            "GROUP_AUTHORIZATION_FAILED",
        )
        secure.acl("User:bob", "GROUP", group, "READ")
        no_write = bob.post(f"{path}/redrive", json=body)
        assert (no_write.status_code, no_write.json()["error_code"]) == (
            403,
            "TOPIC_AUTHORIZATION_FAILED",
        )
        assert "WRITE" in no_write.json()["message"]
        secure.acl("User:bob", "TOPIC", source, "WRITE")
        allowed = bob.post(f"{path}/redrive", json=body)
        # past the ACLs: the partition has nothing archived
        assert (allowed.status_code, allowed.json()["error_code"]) == (409, "INVALID_RECORD_STATE")
