"""A share consumer whose process dies (SIGKILL: no leave, no session close) has its records
delivered to another member at once, not after their acquisition lock, with their delivery
counts kept: its share session ends with the connection that opened it (Kafka 4.1+)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

from tests.support.consumers import share_consumer

LOCK_MS = 60_000  # far longer than the test may take: only a release brings the records back

# a consumer that takes records and holds them, never acknowledging, until it is killed
HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
held = []
while not held:
    held = [m for m in c.poll(0.5) or [] if m.error() is None]
print(" ".join(str(m.offset()) for m in held), flush=True)
time.sleep(600)
"""


def held_by(proc: subprocess.Popen[str], timeout: float) -> list[int]:
    """The offsets the holder printed once it held records."""
    out = proc.stdout
    assert out is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert line and line[0].strip(), "the holding consumer got no records"
    return [int(o) for o in line[0].split()]


def test_a_consumer_killed_with_sigkill_has_its_records_delivered_to_another_at_once(
    proxy, topic, produce
):
    t = topic(1)
    produce(t, 20, partitions=1)
    p = proxy(record_lock_duration_ms=LOCK_MS)
    group = f"g-{uuid.uuid4().hex[:6]}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, p.bootstrap, group, t],
        stdout=subprocess.PIPE,
        text=True,
    )
    other = share_consumer(p, group)  # implicit: each poll accepts the one before
    try:
        held = held_by(holder, 60)
        other.subscribe([t])
        assert [m for m in other.poll(3) or [] if m.error() is None] == []  # all are held
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        killed = time.monotonic()
        got: dict[int, int] = {}
        while len(got) < len(held) and time.monotonic() - killed < LOCK_MS / 1000 / 3:
            for m in other.poll(0.5) or []:
                assert m.error() is None, m.error()
                got[m.offset()] = m.delivery_count()
        waited = time.monotonic() - killed
        assert sorted(got) == held, f"after {waited:.1f} s"
        assert set(got.values()) == {2}  # its first delivery was counted
        assert waited < LOCK_MS / 1000 / 3, waited  # released, not timed out
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        other.close()
