"""Every share group at a glance: `GET /v1/share-groups` and `groups list` with members, topics,
lag and the age of the oldest record not yet acknowledged (from the record batches' timestamps),
the same age as a gauge, and `groups describe --all-groups`; against a real proxy, broker,
Postgres and librdkafka ShareConsumer."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType

from tests.support.admin_api import api, cli
from tests.support.consumers import poll_until, share_consumer, wait_for
from tests.support.metrics import scrape

AGE = "shareproxy_share_partition_oldest_unacked_age_seconds"


def _listed(http: httpx.Client, group: str) -> tuple[dict, float, float]:
    """The group's summary, with the wall clock just before and just after asking."""
    before = time.time()
    listed = http.get("/v1/share-groups").json()
    after = time.time()
    return next(g for g in listed if g["group_id"] == group), before, after


def _known_age_after(
    http: httpx.Client, group: str, moment: float, lag: int = 6
) -> tuple[dict, float, float] | None:
    """The group's summary asked after ``moment`` (the wall clock), if it has this lag and knows
    its age: the age is unknown (None) in a listing whose read of the oldest record's batch
    came back empty."""
    if time.time() < moment:
        return None
    listed = _listed(http, group)
    known = listed[0]["oldest_unacked_age_seconds"] is not None
    return listed if known and listed[0]["lag"] == lag else None


def _age_gauge(proxy, group: str, topic: str) -> float | None:
    labels = tuple(sorted({"group": group, "topic": topic, "partition": "0"}.items()))
    return scrape(proxy).get((AGE, labels))


@pytest.mark.long
def test_lag_and_oldest_unacked_age_follow_the_records_timestamps(proxy, topic, produce):
    p = proxy()
    t = topic(1)
    produced_from = time.time()
    produce(t, 10, partitions=1)
    produced_by = time.time()
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group, mode="explicit")
    c.subscribe([t])
    try:
        got = poll_until(c, 10, 30)
        assert sorted(m.offset() for m in got) == list(range(10))
        for m in got[:4]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()  # 0..3 acknowledged; 4..9 held by the consumer, unacknowledged
        with api(p) as http:
            g, asked, answered = wait_for(
                lambda: _known_age_after(http, group, 0.0, lag=6), 30, "lag 6 and a known age"
            )
            assert (g["state"], g["members"], g["topics"]) == ("Stable", 1, [t])
            age = g["oldest_unacked_age_seconds"]
            # the oldest waiting record was produced between produced_from and produced_by
            assert asked - produced_by - 1 <= age <= answered - produced_from + 1, g
            later, asked_again, answered_again = wait_for(
                lambda: _known_age_after(http, group, answered + 1.5), 30, "an age 1.5 s later"
            )
            assert later["lag"] == 6
            grew = later["oldest_unacked_age_seconds"] - age
            assert asked_again - answered - 0.2 <= grew, (age, later)
            assert grew <= answered_again - asked + 0.2, (age, later)
            gauge = _age_gauge(p, group, t)
            assert gauge is not None and gauge >= later["oldest_unacked_age_seconds"] - 0.5

            table = cli(p, "list")
            assert table.returncode == 0, table.stderr
            header = next(line for line in table.stdout.splitlines() if "GROUP" in line)
            for column in ("STATE", "MEMBERS", "TOPICS", "LAG", "LAG AGE"):
                assert column in header, table.stdout
            row = next(line for line in table.stdout.splitlines() if group in line)
            assert "Stable" in row and t in row and " 6 " in row, row
            as_json = json.loads(cli(p, "list", "--output", "json").stdout)
            mine = next(x for x in as_json if x["group_id"] == group)
            assert (mine["members"], mine["lag"]) == (1, 6)

            for m in got[4:]:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
            done = wait_for(
                lambda: (lambda x: x if x["lag"] == 0 else None)(_listed(http, group)[0]),
                30,
                "lag 0",
            )
            assert done["oldest_unacked_age_seconds"] == 0
            assert wait_for(lambda: _age_gauge(p, group, t) == 0, 10, "gauge 0")
    finally:
        c.close()


@pytest.mark.long
def test_describe_all_groups_is_every_groups_describe(proxy, topic):
    p = proxy()
    t = topic(1)
    groups = sorted(f"g-{uuid.uuid4().hex[:6]}" for _ in range(2))
    consumers = []
    try:
        for group in groups:
            c = share_consumer(p, group)
            c.subscribe([t])
            consumers.append(c)
        with api(p) as http:

            def joined() -> bool:
                for c in consumers:
                    c.poll(0.2)
                listed = {g["group_id"]: g for g in http.get("/v1/share-groups").json()}
                return all(listed.get(g, {}).get("members") == 1 for g in groups)

            wait_for(joined, 30, "both groups joined")
            one = [http.get(f"/v1/share-groups/{g}").json() for g in groups]
        every = cli(p, "describe", "--all-groups", "--output", "json")
        assert every.returncode == 0, every.stderr
        described = json.loads(every.stdout)
        assert isinstance(described, list)
        by_id = {d["group_id"]: d for d in described}

        def members(view: dict) -> list[dict]:  # as of a heartbeat that may have moved on
            return [{**m, "last_heartbeat": None} for m in view["members"]]

        for d in one:
            assert members(by_id[d["group_id"]]) == members(d)
        table = cli(p, "describe", "--all-groups")
        assert table.returncode == 0 and all(f"group {g}" in table.stdout for g in groups)
        assert cli(p, "describe", groups[0]).returncode == 0
        for wrong in (("describe",), ("describe", groups[0], "--all-groups")):
            refused = cli(p, *wrong)
            assert refused.returncode == 2, refused
            assert "--all-groups" in refused.stderr
    finally:
        for c in consumers:
            c.close()
