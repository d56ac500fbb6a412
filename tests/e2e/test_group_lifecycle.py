"""A share group's life on the running proxy: kept until deleted by default, as Kafka keeps
share groups since 4.1; with a retention set, an empty group and a topic its members dropped
expire there and then, logged and counted; group.share.max.groups caps how many there are."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest
from kio.schema.share_group_heartbeat.v1 import request as hb

from tests.support.consumers import poll_until, share_consumer
from tests.support.kafka_client import call

RETENTION = {"share_group_retention_ms": 3000, "share_group_retention_check_interval_ms": 500}


def _groups(p) -> dict[str, str]:
    listed = httpx.get(f"{p.admin_url}/v1/share-groups", timeout=10).json()
    return {g["group_id"]: g["state"] for g in listed}


def _topics_with_state(p, group: str) -> set[str]:
    got = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/offsets", timeout=10).json()
    return {row["topic"] for row in got["partitions"]}


def _counter(p, name: str) -> float:
    text = httpx.get(f"{p.admin_url}/metrics", timeout=10).text
    m = re.search(rf"^{name}_total (\S+)$", text, re.M)
    assert m is not None, f"{name}_total is not exported"
    return float(m.group(1))


@pytest.mark.long
def test_an_empty_group_expires_after_the_retention_and_a_live_one_stays(proxy, topic, produce):
    p = proxy(**RETENTION)
    name = topic(1)
    produce(name, 10, partitions=1)
    expiring, live = f"expiring-{uuid.uuid4().hex[:6]}", f"live-{uuid.uuid4().hex[:6]}"
    keeper = share_consumer(p, live)
    keeper.subscribe([name])
    try:
        assert len(poll_until(keeper, 10, 60)) == 10
        c = share_consumer(p, expiring)
        c.subscribe([name])
        assert len(poll_until(c, 10, 60)) == 10
        c.close()  # implicit mode: the close acknowledges the records; the group is Empty
        closed = time.monotonic()
        assert _groups(p).get(expiring) == "Empty"
        deadline = closed + 30
        while expiring in _groups(p):
            assert time.monotonic() < deadline, "the empty group never expired"
            keeper.poll(0.2)
        assert time.monotonic() - closed >= 2.5, "expired before the retention passed"
        assert _groups(p).get(live) == "Stable"
        assert _counter(p, "share_group_expirations") == 1
        assert _counter(p, "share_offset_expirations") == 1  # its one share-partition
        assert "group expired" in p.log()
        # its state went with it: a member joining the name afresh starts from the reset
        again = share_consumer(p, expiring)
        again.subscribe([name])
        try:
            assert len(poll_until(again, 10, 60)) == 10
        finally:
            again.close()
    finally:
        keeper.close()


@pytest.mark.long
def test_the_state_of_a_topic_the_members_dropped_expires_and_the_rest_stays(proxy, topic, produce):
    p = proxy(**RETENTION)
    kept, dropped = topic(1), topic(1)
    produce(kept, 5, partitions=1)
    produce(dropped, 5, partitions=1)
    group = f"dropping-{uuid.uuid4().hex[:6]}"
    c = share_consumer(p, group)
    try:
        c.subscribe([kept, dropped])
        assert len(poll_until(c, 10, 60)) == 10
        c.poll(1)  # acknowledges what the last poll returned
        assert _topics_with_state(p, group) == {kept, dropped}
        c.subscribe([kept])
        changed = time.monotonic()
        deadline = changed + 30
        while _topics_with_state(p, group) != {kept}:
            assert time.monotonic() < deadline, "the dropped topic's state never expired"
            c.poll(0.2)
        assert time.monotonic() - changed >= 2.5, "expired before the retention passed"
        assert _groups(p).get(group) == "Stable"
        assert _counter(p, "share_offset_expirations") == 1
        assert _counter(p, "share_group_expirations") == 0
        assert "offsets expired" in p.log()
    finally:
        c.close()


def test_a_heartbeat_that_would_create_one_group_too_many_is_refused(proxy, topic):
    p = proxy(group_share_max_groups=1)
    name = topic(1)

    def join(group: str) -> hb.ShareGroupHeartbeatResponse:
        return call(
            p.port,
            hb.ShareGroupHeartbeatRequest(
                group_id=group,
                member_id=uuid.uuid4().hex,
                member_epoch=0,
                subscribed_topic_names=(name,),
            ),
        )

    first, second = f"capped-{uuid.uuid4().hex[:6]}", f"capped-{uuid.uuid4().hex[:6]}"
    assert join(first).error_code == 0
    refused = join(second)
    assert refused.error_code == 81  # GROUP_MAX_SIZE_REACHED
    assert "group.share.max.groups" in refused.error_message
    assert join(first).error_code == 0  # a group that exists may always be joined
    assert set(_groups(p)) == {first}
