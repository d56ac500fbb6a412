"""Real clients for the end-to-end tests: confluent-kafka's ShareConsumer (librdkafka) and a
raw kio connection, plus the waits the tests share."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

from confluent_kafka import ShareConsumer


def share_consumer(proxy: Any, group: str, mode: str = "implicit") -> ShareConsumer:
    return ShareConsumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": mode,
        }
    )


def poll_until(consumer: ShareConsumer, want: int, timeout: float) -> list:
    """Messages (errors excluded) until ``want`` arrived or ``timeout`` passed."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in consumer.poll(0.5) or []:
            assert m.error() is None, m.error()
            got.append(m)
    return got


def accept_all(consumer: ShareConsumer, want: int, timeout: float = 60) -> list:
    got = poll_until(consumer, want, timeout)
    consumer.commit_sync()  # implicit mode: acknowledges what the last poll returned
    return got


def wait_for(check: Any, timeout: float = 30, what: str = "condition") -> Any:
    """``check()``'s first truthy value, polled every 0.2 s; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def readiness(proxy: Any) -> int:
    """The HTTP status of the proxy's /readyz."""
    try:
        with urllib.request.urlopen(f"{proxy.admin_url}/readyz", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
