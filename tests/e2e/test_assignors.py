"""The assignor is a node's setting (Kafka's group.share.assignors): with Kafka's ``simple``
one, real librdkafka share consumers outnumbering the partitions are spread as Kafka spreads
them, ShareGroupDescribe and the REST view name it, and every record is consumed once."""

from __future__ import annotations

import threading
import uuid

import httpx

from tests.support.consumers import share_consumer, wait_for


def test_kafkas_simple_assignor_shares_every_partition_equally(proxy, topic, produce):
    p = proxy(group_share_assignors="simple")
    t = topic(3)
    produce(t, 300, partitions=3)
    group = f"simple-{uuid.uuid4().hex[:6]}"
    consumers = [share_consumer(p, group) for _ in range(4)]
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def consume(c) -> None:
        while not stop.is_set():
            for m in c.poll(0.5):
                if m.error() is None:
                    with lock:
                        seen.append((m.partition(), m.offset()))

    threads = [threading.Thread(target=consume, args=(c,)) for c in consumers]
    for c in consumers:
        c.subscribe([t])
    for th in threads:
        th.start()
    try:

        def spread():
            view = httpx.get(f"{p.admin_url}/v1/share-groups/{group}", timeout=10).json()
            parts = [m["assignment"].get(t, []) for m in view.get("members", [])]
            per_partition = [sum(1 for ps in parts if n in ps) for n in range(3)]
            # a member shows the assignment it last heartbeated for, so while the fourth joins
            # the view may mix two assignments, even one that covers each partition twice:
            # wait for the one the assignor settles on
            shares = sorted(len(ps) for ps in parts)
            if per_partition == [2, 2, 2] and shares == [1, 1, 2, 2]:  # ceil(4 / 3) each
                return view
            last[0] = view
            return None

        last: list[object] = [None]
        try:
            view = wait_for(spread, 60, "each partition shared by two of four members")
        except AssertionError:
            raise AssertionError(f"the last view: {last[0]}") from None
        assert view["assignor"] == "simple"
        wait_for(lambda: len(seen) >= 300, 60, "every record consumed")
    finally:
        stop.set()
        for th in threads:
            th.join(10)
        for c in consumers:
            c.close()
    assert len(set(seen)) == 300
