"""Records taken and accepted over the REST API, as an HTTP consumer does."""

from __future__ import annotations

import time

import httpx


def accept_some(http: httpx.Client, group: str, topic: str) -> None:
    """Fetch a few records and accept them (a node back from an outage serves again once it
    has rejoined: empty answers until then)."""
    body = {"topics": [topic], "max_wait_ms": 1000, "max_records": 5}
    deadline = time.monotonic() + 30
    got = http.post(f"/v1/share-groups/{group}/records/fetch", json=body)
    while not got.json().get("records"):
        assert time.monotonic() < deadline, got.text
        got = http.post(f"/v1/share-groups/{group}/records/fetch", json=body)
    acks = [
        {"topic": topic, "partition": r["partition"], "first_offset": r["offset"]}
        | {"last_offset": r["offset"], "type": "accept"}
        for r in got.json()["records"]
    ]
    body = {"consumer_id": got.json()["consumer_id"], "acknowledgements": acks}
    r = http.post(f"/v1/share-groups/{group}/records/acknowledge", json=body)
    assert r.status_code == 200 and all(x["error_code"] is None for x in r.json()["results"])
