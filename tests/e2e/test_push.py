"""Push delivery (beyond KIP-932) end to end: a real proxy on Tansu and Postgres pushes a share
group's records to a real HTTP endpoint (uvicorn on a local port), and the endpoint's status
decides each record's fate: 2xx accepts, 408, 429, 5xx or no answer releases (it comes back,
its delivery count raised), any other 4xx rejects."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
from confluent_kafka import Producer

from tests.support.consumers import wait_for
from tests.support.proxy import ProxyProcess
from tests.support.push_endpoint import Answer, PushEndpoint


@pytest.fixture
def endpoint() -> Iterator[Callable[..., PushEndpoint]]:
    started: list[PushEndpoint] = []

    def start(answer: Callable[..., Answer] | None = None) -> PushEndpoint:
        e = PushEndpoint(answer) if answer is not None else PushEndpoint()
        started.append(e)
        return e.start()

    yield start
    for e in started:
        e.stop()


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 3) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        p.produce(
            topic,
            key=b"key-%d" % i,
            value=value,
            partition=i % partitions,
            headers=[("content-type", b"text/plain"), ("trace", b"t\x00%d" % i)],
            timestamp=1_700_000_000_000 + i,
        )
    assert p.flush(30) == 0


def _set_push(p: ProxyProcess, group: str, **spec: object) -> httpx.Response:
    return httpx.put(f"{p.admin_url}/v1/share-groups/{group}/push", json=spec, timeout=30)


def _group() -> str:
    return f"push-{uuid.uuid4().hex[:6]}"


def _status(p: ProxyProcess, group: str) -> dict[str, object]:
    r = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/push", timeout=30)
    r.raise_for_status()
    return r.json()["status"]


def test_every_record_is_posted_once_as_a_cloudevent_and_accepted_by_its_2xx(
    proxy, topic, endpoint
):
    t = topic(3)
    e = endpoint()
    p = proxy(push_allowed_urls=e.url)
    values = [b"value-%d" % i for i in range(150)]
    _produce(p.upstream, t, values)
    group = _group()
    r = _set_push(p, group, url=e.url, topics=[t], authorization="Bearer s3cret")
    assert r.status_code == 201, r.text
    assert r.json()["authorization"] == "set"
    assert "s3cret" not in r.text

    wait_for(lambda: len(e.accepted()) == len(values), 60, "every record accepted")
    ids = [x.id for x in e.seen]
    assert len(ids) == len(set(ids)), "a record accepted once is never pushed again"
    first = e.of(f"{t}/0/0")[0]
    assert first.body == b"value-0"
    assert first.headers["ce-specversion"] == "1.0"
    assert first.headers["ce-kafkatopic"] == t
    assert first.headers["ce-kafkapartition"] == "0"
    assert first.headers["ce-kafkaoffset"] == "0"
    assert first.headers["ce-deliverycount"] == "1"
    assert first.headers["ce-partitionkey"] == "key-0"
    assert first.headers["ce-time"] == "2023-11-14T22:13:20.000Z"
    assert first.headers["content-type"] == "text/plain"
    assert first.headers["authorization"] == "Bearer s3cret"
    assert first.record_header("trace") == b"t\x000"

    def settled() -> dict[str, object] | None:
        status = _status(p, group)
        return status if status["outcomes"]["accepted"] == len(values) else None

    status = wait_for(settled, 30, "the status to count every acceptance")
    assert status["endpoint"] == "up" and status["in_flight"] == 0
    assert status["outcomes"]["released"] == 0
    shown = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/push", timeout=30)
    assert "s3cret" not in shown.text and shown.json()["url"] == e.url
    assert "s3cret" not in p.log()

    # the push changed (200) and removed (204): nothing more is pushed
    assert _set_push(p, group, url=e.url, topics=[t], max_in_flight=4).status_code == 200
    assert httpx.delete(f"{p.admin_url}/v1/share-groups/{group}/push").status_code == 204
    assert httpx.get(f"{p.admin_url}/v1/share-groups/{group}/push").status_code == 404
    assert httpx.delete(f"{p.admin_url}/v1/share-groups/{group}/push").status_code == 404
    seen = len(e.seen)
    _produce(p.upstream, t, [b"after"], partitions=1)
    fetched = httpx.post(
        f"{p.admin_url}/v1/share-groups/{group}/records/fetch",
        json={"topics": [t], "max_wait_ms": 10_000},
        timeout=30,
    ).json()["records"]
    assert [(r["value"], r["delivery_count"]) for r in fetched] == [("after", 1)]
    assert len(e.seen) == seen


def test_the_status_decides_accept_release_or_reject(proxy, topic, endpoint):
    """As the table in the issue: 2xx accepts; 503 and a time-out release (the record comes
    back with its delivery count raised); 429 releases and its Retry-After holds pushes back;
    400 rejects, once, and the archive keeps it; at the delivery limit a released record is
    archived too."""
    t = topic(1)
    plan = {
        b"ok": [200],
        b"flaky": [503, 201],
        b"slow": ["slow", 204],
        b"busy": [429, 200],
        b"bad": [400],
        b"broken": [500, 500, 500],
    }
    answers = {k: list(v) for k, v in plan.items()}

    def answer(headers: dict[str, str], body: bytes) -> Answer:
        step = answers[body].pop(0) if len(answers[body]) > 1 else answers[body][0]
        if step == "slow":
            return Answer(200, delay_s=3)
        if step == 429:
            return Answer(429, {"retry-after": "1"})
        return Answer(int(step))

    e = endpoint(answer)
    p = proxy(push_allowed_urls=e.url, delivery_count_limit=3, redelivery_backoff_initial_ms=0)
    group = _group()
    _produce(p.upstream, t, list(plan), partitions=1)
    assert _set_push(p, group, url=e.url, topics=[t], timeout_ms=1000).status_code == 201

    def by_body(body: bytes) -> list[int | None]:
        return [x.status for x in e.seen if x.body == body]

    wait_for(lambda: len(by_body(b"broken")) == 3, 60, "the broken record to reach its limit")
    wait_for(lambda: len(e.accepted()) == 4, 60, "ok, flaky, slow and busy accepted")
    assert by_body(b"ok") == [200]
    assert by_body(b"flaky") == [503, 201]
    assert by_body(b"busy") == [429, 200]
    assert by_body(b"bad") == [400], "a rejected record is never pushed again"
    slow = wait_for(
        lambda: (
            len(s := sorted((x for x in e.seen if x.body == b"slow"), key=lambda x: x.began)) == 2
            and s
        ),
        10,
        "the first slow push to end at the endpoint",
    )
    assert [x.delivery_count for x in slow] == [1, 2]
    assert slow[1].began >= slow[0].began + 0.9, "the time-out ended the first push"
    assert [x.delivery_count for x in e.seen if x.body == b"broken"] == [1, 2, 3]

    status = wait_for(
        lambda: (s := _status(p, group))["outcomes"]["rejected"] == 1 and s, 30, "the status"
    )
    assert status["outcomes"]["accepted"] == 4
    assert status["outcomes"]["timed_out"] >= 1

    def reasons() -> dict[int, str]:
        url = f"{p.admin_url}/v1/share-groups/{group}/archived"
        listed = httpx.get(url, timeout=30).json()["archived"]
        return {a["first_offset"]: a["reason"] for a in listed}

    assert wait_for(lambda: len(r := reasons()) == 2 and r, 10, "both archived") == {
        4: "rejected: HTTP 400",
        5: "delivery-limit",
    }
