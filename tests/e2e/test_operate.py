"""Running it: SIGTERM during consumption loses nothing and redelivers only what was not
acknowledged; JSON logs are one object per line, name the events and hold no secrets."""

from __future__ import annotations

import json
import threading
import time
import uuid

from confluent_kafka import AcknowledgeType, KafkaException

from tests.support.consumers import share_consumer
from tests.support.proxy import ProxyProcess


class Tally:
    """What consumers saw: every delivery, and the records whose acceptance the proxy confirmed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[tuple[int, int]] = []
        self.confirmed: set[tuple[int, int]] = set()
        self.redelivered_after_confirm: list[tuple[int, int]] = []
        self.errors: list[str] = []

    def consume(self, consumer, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                batch = consumer.poll(0.5) or []
            except KafkaException as e:  # the proxy is restarting
                self.errors.append(str(e))
                continue
            polled = []
            for m in batch:
                if m.error() is not None:
                    continue
                key = (m.partition(), m.offset())
                with self.lock:
                    self.deliveries.append(key)
                    if key in self.confirmed:
                        self.redelivered_after_confirm.append(key)
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                polled.append(key)
            if not polled:
                continue
            try:
                result = consumer.commit_sync(30)
            except KafkaException as e:
                self.errors.append(str(e))
                continue
            ok = {tp.partition for tp, err in result.items() if err is None}
            with self.lock:
                self.confirmed.update(k for k in polled if k[0] in ok)
            # a consumer doing some work (per poll and per record): the SIGTERM lands mid-stream
            time.sleep(0.05 + 0.0002 * len(polled))


def test_sigterm_during_consumption_loses_nothing_and_redelivers_only_unacknowledged(
    proxy, topic, produce
):
    total = 20000
    t = topic(3)
    produce(t, total)
    p = proxy()
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumers = [share_consumer(p, group, mode="explicit") for _ in range(2)]
    tally = Tally()
    stop = threading.Event()
    threads = []
    for c in consumers:
        c.subscribe([t])
        threads.append(threading.Thread(target=tally.consume, args=(c, stop), daemon=True))
    for th in threads:
        th.start()
    try:
        deadline = time.monotonic() + 60
        while len(tally.confirmed) < total // 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(tally.confirmed) >= total // 4, "consumption did not start"
        assert p.proc is not None
        signalled = time.monotonic()
        p.proc.terminate()  # SIGTERM, mid-consumption
        rc = p.proc.wait(30)
        took = time.monotonic() - signalled
        p.proc = None
        confirmed_at_stop = len(tally.confirmed)
        assert rc == 0, p.log()
        assert took < 15, f"SIGTERM took {took:.1f}s"
        assert confirmed_at_stop < total, "consumption finished before the SIGTERM: nothing tested"
        p.start()  # same port, same state: the consumers reconnect by themselves
        all_records = {(i % 3, i // 3) for i in range(total)}
        deadline = time.monotonic() + 120
        while tally.confirmed != all_records and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
        for c in consumers:
            c.close()
    assert tally.confirmed == all_records, f"{len(all_records - tally.confirmed)} records lost"
    assert not tally.redelivered_after_confirm, "acknowledged records were delivered again"
    log = p.log()
    assert "stopping: no new connections" in log and "stopped" in log


def test_json_logs_one_object_per_line_with_events_and_no_secrets(broker, postgres, topic, produce):
    secret = "s3cret-Pa55"  # the fixture's Postgres trusts loopback, so any password connects
    url = postgres.create_database(f"json{uuid.uuid4().hex[:6]}", template="template_migrated")
    url = url.replace("postgres@", f"postgres:{secret}@")
    p = ProxyProcess(broker.bootstrap, url, log_format="json", auto_offset_reset="earliest")
    try:
        p.start()
        t = topic(1)
        produce(t, 10, partitions=1)
        group = f"g-{uuid.uuid4().hex[:6]}"
        c = share_consumer(p, group)
        c.subscribe([t])
        try:
            got = 0
            deadline = time.monotonic() + 30
            while got < 10 and time.monotonic() < deadline:
                got += len(c.poll(0.5) or [])
            c.commit_sync()
        finally:
            c.close()
    finally:
        code = p.stop()
    assert code == 0
    lines = [line for line in p.log().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= e.keys() for e in entries)
    messages = [e["message"] for e in entries]
    joined = [e for e in entries if e["message"] == "member joined"]
    assert joined and joined[0]["group"] == group
    assert "member left" in messages and "stopped" in messages
    assert any(e["message"].startswith("loaded ") for e in entries)
    assert secret not in p.log()
    assert not [e for e in entries if e["level"] == "ERROR"]
