"""An operator sees single in-flight records and changes them, against running proxies with a
real broker, real Postgres and librdkafka ShareConsumers in explicit mode: the view names the
member holding records and when its lock ends; a member's locks are released (delivery counts
kept), records skipped and rejected are never delivered, each change is audited; from any node
of a cluster, the node leading the partition answers."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime

import httpx
import pytest
from confluent_kafka import AcknowledgeType
from sqlalchemy import select

from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.tables import share_archived
from tests.support.admin_api import cli
from tests.support.cluster import started
from tests.support.consumers import poll_until, share_consumer


def member_of(http: httpx.Client, group: str) -> str:
    members = http.get(f"/v1/share-groups/{group}").json()["members"]
    assert len(members) == 1, members
    return members[0]["member_id"]


def accepted(consumer, want: int, timeout: float) -> list:
    """Records polled and accepted one by one (explicit mode) until ``want`` or ``timeout``."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in consumer.poll(0.5) or []:
            assert m.error() is None, m.error()
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            got.append(m)
    return got


def states(view: dict) -> list[tuple]:
    return [
        (r["first_offset"], r["last_offset"], r["state"], r["delivery_count"], r["member_id"])
        for r in view["records"]
    ]


async def archived_rows(state_url: str, group: str) -> list[tuple[int, int, int]]:
    engine = create_engine(state_url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                select(
                    share_archived.c.first_offset,
                    share_archived.c.last_offset,
                    share_archived.c.delivery_count,
                ).where(share_archived.c.group_id == group)
            )
            return sorted(tuple(r) for r in rows)
    finally:
        await engine.dispose()


@pytest.mark.long
def test_view_release_member_skip_and_reject_then_a_new_consumer(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produce(t, 10, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    base = f"/v1/share-groups/{group}/partitions/{t}/0/records"
    a = share_consumer(p, group, mode="explicit")
    a.subscribe([t])
    b = None
    with httpx.Client(base_url=p.admin_url, timeout=30) as http:
        try:
            assert len(poll_until(a, 10, 30)) == 10
            member = member_of(http, group)

            # the view: every record Acquired by the member, its lock ending in the future
            view = http.get(base).json()
            assert (view["start_offset"], view["end_offset"], view["next_offset"]) == (0, 10, None)
            assert {(s[2], s[3], s[4]) for s in states(view)} == {("Acquired", 1, member)}
            assert sum(s[1] - s[0] + 1 for s in states(view)) == 10
            ends = {datetime.fromisoformat(r["lock_expires_at"]) for r in view["records"]}
            assert all(end > datetime.now(UTC) for end in ends)
            page = http.get(base, params={"from_offset": 4, "limit": 1}).json()
            assert page["records"][0]["first_offset"] == 4
            table = cli(p, "records", group, f"{t}:0")
            assert table.returncode == 0, table.stderr
            assert member in table.stdout and "Acquired" in table.stdout

            # refusals: 4xx with a message, nothing changed
            for url, body, status, code in [
                (f"{base}/accept", {"first_offset": 10}, 409, "INVALID_RECORD_STATE"),
                (f"{base}/accept", {"first_offset": 5, "last_offset": 4}, 422, "INVALID_REQUEST"),
                (
                    f"/v1/share-groups/{group}/partitions/{t}/7/records/reject",
                    {"first_offset": 0},
                    404,
                    "UNKNOWN_TOPIC_OR_PARTITION",
                ),
                (f"{base}/skip", {"first_offset": 0}, 422, "INVALID_REQUEST"),
            ]:
                refused = http.post(url, json=body)
                assert refused.status_code == status, refused.text
                assert refused.json()["error_code"] == code and refused.json()["message"]
            assert http.get(base, params={"limit": 0}).status_code == 422
            unknown = http.get(
                f"/v1/share-groups/nope-{uuid.uuid4().hex[:6]}/partitions/{t}/0/records"
            )
            assert unknown.status_code == 404
            assert http.get(base).json()["records"] == view["records"]

            # a member that hangs while heartbeating: its locks end, delivery counts kept
            released = cli(p, "release-member", group, member, "-o", "json")
            assert released.returncode == 0, released.stderr
            assert json.loads(released.stdout)["released"] == [
                {"topic": t, "partition": 0, "offsets": [[0, 9]]}
            ]
            assert states(http.get(base).json()) == [(0, 9, "Available", 1, None)]
            a.close()  # its acknowledgements of records no longer its own would be refused
            a = None

            # skip offset 3 while Available; reject 5-6
            skipped = cli(p, "records-act", group, f"{t}:0", "--offsets", "3", "--accept")
            assert skipped.returncode == 0, skipped.stderr
            assert "Acknowledged" in skipped.stdout
            rejected = http.post(f"{base}/reject", json={"first_offset": 5, "last_offset": 6})
            assert rejected.status_code == 200, rejected.text
            assert states(rejected.json())[0] == (5, 6, "Archived", 1, None)
            again = http.post(f"{base}/reject", json={"first_offset": 6})
            assert again.status_code == 409 and "Archived" in again.json()["message"]

            # a new consumer gets the rest, each on its second delivery, never 3, 5 or 6
            b = share_consumer(p, group, mode="explicit")
            b.subscribe([t])
            got = accepted(b, 7, 30)
            got += accepted(b, 1, 3)  # nothing more comes
            assert sorted(m.offset() for m in got) == [0, 1, 2, 4, 7, 8, 9]
            assert {m.delivery_count() for m in got} == {2}
        finally:
            for c in (a, b):
                if c is not None:
                    c.close()
    assert asyncio.run(archived_rows(p.state_url, group)) == [(5, 6, 1)]
    log = p.log()
    assert "member release by User:ANONYMOUS from 127.0.0.1: OK" in log
    assert "records accept by User:ANONYMOUS from 127.0.0.1: OK" in log
    assert "records reject by User:ANONYMOUS from 127.0.0.1: INVALID_RECORD_STATE" in log


@pytest.mark.long
def test_every_node_answers_for_the_partition_its_leader_holds(cluster, topic, produce):
    nodes, t, leaders = started(cluster, topic, produce, 2, 20, partitions=2,
                                record_lock_duration_ms=30000)  # fmt: skip
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(nodes[0], group, mode="explicit")
    c.subscribe([t])

    def view(node, partition: int) -> dict:
        path = f"/v1/share-groups/{group}/partitions/{t}/{partition}/records"
        answer = httpx.get(node.admin_url + path, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    try:
        got = poll_until(c, 1, 60)  # one poll: explicit mode acknowledges before the next
        held = {m.partition() for m in got}
        with httpx.Client(base_url=nodes[1].admin_url, timeout=30) as http:
            member = member_of(http, group)
        # the live records (Acquired), not the stored ones, whichever node is asked
        for partition in held:
            for node in nodes:
                acquired = [s for s in states(view(node, partition)) if s[2] == "Acquired"]
                assert {s[4] for s in acquired} == {member}
                offsets = {o for s in acquired for o in range(s[0], s[1] + 1)}
                assert {m.offset() for m in got if m.partition() == partition} <= offsets
        # one node releases the member's locks on every node
        answer = httpx.post(
            f"{nodes[0].admin_url}/v1/share-groups/{group}/members/{member}/release", timeout=30
        ).json()
        assert answer["unreached"] == []
        assert {r["partition"] for r in answer["released"]} >= held
        for partition in held:
            assert "Acquired" not in {s[2] for s in states(view(nodes[1], partition))}
            # a change through the node that does not lead it is made by the leader
            other = next(n for n in nodes if int(n.options["node_id"]) != leaders[partition])
            path = f"/v1/share-groups/{group}/partitions/{t}/{partition}/records/accept"
            skipped = httpx.post(f"{other.admin_url}{path}", json={"first_offset": 1}, timeout=30)
            assert skipped.status_code == 200, skipped.text
            assert states(skipped.json())[0][:3] == (1, 1, "Acknowledged")
    finally:
        c.close()


@pytest.mark.long
def test_seeing_needs_describe_and_changing_needs_read_on_group_and_topic(secure, topic, produce):
    t = topic(1)
    produce(t, 5, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = secure.consumer("admin", group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([t])
    try:
        assert poll_until(c, 1, 30)
    finally:
        c.close()  # the share-partition has state now; its records are Available again
    base = f"/v1/share-groups/{group}/partitions/{t}/0/records"
    with secure.http("bob") as bob:
        assert bob.get(base).json()["error_code"] == "GROUP_AUTHORIZATION_FAILED"
        secure.acl("User:bob", "GROUP", group, "DESCRIBE")
        seen = bob.get(base)
        assert seen.status_code == 403 and seen.json()["error_code"] == "TOPIC_AUTHORIZATION_FAILED"
        secure.acl("User:bob", "TOPIC", t, "DESCRIBE")
        assert bob.get(base).status_code == 200
        refused = bob.post(f"{base}/reject", json={"first_offset": 0})
        assert refused.status_code == 403, refused.text
        assert bob.post(f"/v1/share-groups/{group}/members/m/release").status_code == 403
        secure.acl("User:bob", "GROUP", group, "READ")
        secure.acl("User:bob", "TOPIC", t, "READ")
        done = bob.post(f"{base}/reject", json={"first_offset": 0})
        assert done.status_code == 200, done.text
        assert bob.get(base).json()["start_offset"] == 1
    with secure.http("admin") as admin:  # the admin's skip of what bob rejected is refused
        assert admin.post(f"{base}/accept", json={"first_offset": 0}).status_code == 409
    changes = [
        json.loads(x)
        for x in secure.proxy.log().splitlines()
        if x.startswith("{") and '"action": "records reject"' in x
    ]
    assert [(e["principal"], e["result"], e["offsets"]) for e in changes] == [
        ("User:bob", "OK", "0-0")
    ]
