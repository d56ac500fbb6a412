"""Push delivery (beyond KIP-932) end to end: a real proxy on Tansu and Postgres pushes a share
group's records to a real HTTP endpoint (uvicorn on a local port), and the endpoint's status
decides each record's fate: 2xx accepts, 408, 429, 5xx or no answer releases (it comes back,
its delivery count raised), any other 4xx rejects."""

from __future__ import annotations

import itertools
import signal
import time
import uuid

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer

from shareproxy.demo.tansu import TansuBroker
from tests.support import metrics
from tests.support.certs import CertificateAuthority
from tests.support.cli_runs import run_cli
from tests.support.cluster import started
from tests.support.consumers import share_consumer, wait_for
from tests.support.proxy import ProxyProcess
from tests.support.push_endpoint import Answer
from tests.support.relay import TcpRelay
from tests.support.topics import create_topic


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


def _upstream_up(p: ProxyProcess) -> float:
    return metrics.value(metrics.scrape(p), "shareproxy_upstream_up")


def _status(p: ProxyProcess, group: str) -> dict[str, object]:
    r = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/push", timeout=30)
    r.raise_for_status()
    return r.json()["status"]


@pytest.mark.floors
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


@pytest.mark.floors
def test_the_status_decides_accept_release_or_reject(proxy, topic, endpoint):
    """As the push-delivery page's table: 2xx accepts; 503 and a time-out release (the record comes
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
    busy = sorted((x for x in e.seen if x.body == b"busy"), key=lambda x: x.began)
    assert busy[1].began >= busy[0].ended + 0.95, "Retry-After: 1 held the pushes back"
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


def test_an_endpoint_that_fails_is_backed_off_and_told_once_then_recovers(proxy, topic, endpoint):
    """While the endpoint fails, pushes pause for a back-off that doubles, then one request
    probes it: a handful of requests, not a busy loop; one warning as the outage begins and
    one line as it ends; then every record goes through."""
    t = topic(1)
    failing = 8
    answered = {"failed": 0}

    def answer(headers: dict[str, str], body: bytes) -> Answer:
        if answered["failed"] < failing:
            answered["failed"] += 1
            return Answer(503)
        return Answer(200)

    e = endpoint(answer)
    # the probes take one record's delivery attempts each: the limit must outlast them
    p = proxy(push_allowed_urls=e.url, redelivery_backoff_initial_ms=0, delivery_count_limit=10)
    group = _group()
    _produce(p.upstream, t, [b"r%d" % i for i in range(40)], partitions=1)
    assert _set_push(p, group, url=e.url, topics=[t], max_in_flight=4).status_code == 201

    wait_for(lambda: len(e.accepted()) == 40, 60, "every record accepted after the outage")
    began = sorted(x.began for x in e.seen)
    # four requests at once find the endpoint failing (one step of back-off); then one probe
    # at a time, 0.1, 0.2, 0.4 and 0.8 s apart
    assert began[failing - 1] - began[0] >= 1.4, "the probes were backed off"
    assert sum(1 for b in began if b < began[4] + 0.09) == 5, "one probe at a time"
    assert len([x for x in e.seen if x.status == 503]) == failing
    log = p.log()
    assert log.count("push endpoint failing") == 1
    assert log.count("push endpoint answers again") == 1
    status = _status(p, group)
    assert status["endpoint"] == "up" and status["endpoint_down_since_ms"] is None
    assert status["last_failure_status"] == 503


def test_a_node_killed_mid_push_pushes_again_only_what_was_in_flight(proxy, topic, endpoint):
    """At least once across a SIGKILL: every record is accepted, and only records whose push
    was under way when the node died (at most max_in_flight) are pushed a second time."""
    t = topic(1)
    e = endpoint(lambda headers, body: Answer(200, delay_s=0.2))
    p = proxy(push_allowed_urls=e.url)
    group = _group()
    count, max_in_flight = 120, 8
    _produce(p.upstream, t, [b"r%d" % i for i in range(count)], partitions=1)
    assert _set_push(p, group, url=e.url, topics=[t], max_in_flight=max_in_flight).is_success
    wait_for(lambda: len(e.accepted()) >= 30, 60, "some records accepted")
    p.kill()
    p.start()
    wait_for(lambda: len(e.accepted()) == count, 90, "every record accepted after the restart")
    accepted = [x.id for x in e.seen if x.status == 200]
    twice = len(accepted) - len(set(accepted))
    assert twice <= max_in_flight, f"{twice} records were pushed again"


def test_two_nodes_push_the_partitions_they_lead_and_show_one_status(
    cluster, topic, produce, endpoint
):
    """Each node pushes the share-partitions it leads; a node that dies has its partitions
    resumed by the other; GET answers the same from either node."""
    e = endpoint(lambda headers, body: Answer(200, delay_s=0.05))
    (one, two), t, _ = started(cluster, topic, produce, 2, 0, partitions=4, push_allowed_urls=e.url)
    group = _group()
    count = 200
    _produce(one.upstream, t, [b"r%d" % i for i in range(count)], partitions=4)
    r = _set_push(one, group, url=e.url, topics=[t], max_in_flight=4)
    assert r.status_code == 201, r.text
    wait_for(lambda: len(e.accepted()) == count, 90, "every record accepted")
    ids = [x.id for x in e.seen if x.status == 200]
    assert len(ids) == len(set(ids)), "a settled fleet pushes each record once"
    for node in (one, two):
        assert f"share-partition loaded group={group}" in node.log(), "each node pushed"

    def same_status() -> dict[str, object] | None:
        a, b = _status(one, group), _status(two, group)
        return a if a["outcomes"] == b["outcomes"] and a["outcomes"]["accepted"] == count else None

    wait_for(same_status, 30, "both nodes to show every acceptance")

    # a node dies: the other leads its partitions once its lease ends, and pushes them
    two.kill()
    more = [b"s%d" % i for i in range(40)]
    _produce(one.upstream, t, more, partitions=4)
    wait_for(lambda: len(e.accepted()) == count + len(more), 90, "the rest pushed by node one")


def test_key_order_keeps_one_record_of_a_key_in_flight_and_in_offset_order(proxy, topic, endpoint):
    """``"ordered": "key"``: at most one record of a key is pushed at a time, and a key's
    records are accepted in offset order, also when one is released and comes back."""
    t = topic(1)
    keys, per_key = 8, 6
    failed: set[str] = set()

    def answer(headers: dict[str, str], body: bytes) -> Answer:
        # each key's third record fails once: the fourth must wait for it
        if body.endswith(b"-2") and headers["ce-id"] not in failed:
            failed.add(headers["ce-id"])
            return Answer(503, delay_s=0.02)
        return Answer(200, delay_s=0.02)

    e = endpoint(answer)
    p = proxy(push_allowed_urls=e.url, redelivery_backoff_initial_ms=0)
    group = _group()
    producer = Producer({"bootstrap.servers": p.upstream, "linger.ms": 5})
    for i in range(per_key):
        for k in range(keys):
            producer.produce(t, key=b"k%d" % k, value=b"k%d-%d" % (k, i), partition=0)
    assert producer.flush(30) == 0
    r = _set_push(p, group, url=e.url, topics=[t], max_in_flight=16, ordered="key")
    assert r.status_code == 201 and r.json()["ordered"] == "key"
    wait_for(lambda: len(e.accepted()) == keys * per_key, 60, "every record accepted")

    by_key: dict[str, list] = {}
    for x in sorted(e.seen, key=lambda x: x.began):
        by_key.setdefault(x.headers["ce-partitionkey"], []).append(x)
    for key, pushes in by_key.items():
        for a, b in itertools.pairwise(pushes):
            assert b.began >= a.ended - 0.005, f"two records of {key} were in flight at once"
        offsets = [int(x.headers["ce-kafkaoffset"]) for x in pushes if x.status == 200]
        assert offsets == sorted(offsets), f"{key}'s records were accepted out of order"
    assert e.most_in_flight > 1, "records of different keys went in parallel"


def test_what_cannot_be_pushed_is_refused_with_its_reason_over_rest_and_the_cli(
    proxy, topic, endpoint
):
    t = topic(1)
    e = endpoint()
    off = proxy()
    group = _group()
    r = _set_push(off, group, url=e.url, topics=[t])
    assert (r.status_code, r.json()["error_code"]) == (400, "POLICY_VIOLATION")
    assert "push is off" in r.json()["message"]

    p = proxy(push_allowed_urls=e.url)
    for spec, status, code in [
        ({"url": "http://127.0.0.1:1/in", "topics": [t]}, 400, "POLICY_VIOLATION"),
        ({"url": e.url + "/../admin", "topics": [t]}, 400, "POLICY_VIOLATION"),
        ({"url": e.url, "topics": ["no-such-topic"]}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
        ({"url": e.url, "topics": ["bad name"]}, 422, None),
        ({"url": e.url, "topics": [t], "max_in_flight": 0}, 422, None),
        ({"url": e.url, "topics": [t], "timeout_ms": "1000"}, 422, None),
        ({"url": e.url, "topics": [t], "retries": 3}, 422, None),
        ({"url": e.url, "topics": [t], "authorization": "a\nb"}, 422, None),
    ]:
        r = _set_push(p, group, **spec)
        assert r.status_code == status, (spec, r.text)
        if code is not None:
            assert r.json()["error_code"] == code, r.text
    r = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/push", timeout=30)
    assert r.status_code == 404, r.text

    # the CLI: the secret from the environment, never from the command line
    _produce(p.upstream, t, [b"one"], partitions=1)
    env = {"SHAREPROXY_ADMIN_URL": p.admin_url, "HOOK_TOKEN": "Bearer cli-secret"}
    made = run_cli(
        "push", "set", group, "--url", e.url, "--topic", t, "--authorization-env", "HOOK_TOKEN",
        env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "set" in made.stdout and "cli-secret" not in made.stdout
    wait_for(lambda: e.seen, 30, "a push with the CLI's authorization")
    assert e.seen[0].headers["authorization"] == "Bearer cli-secret"
    shown = run_cli("push", "show", group, "-o", "json", env=env)
    assert shown.returncode == 0 and '"authorization": "set"' in shown.stdout
    refused = run_cli("push", "set", group, "--url", "http://10.0.0.1/x", "--topic", t, env=env)
    assert refused.returncode == 1 and "POLICY_VIOLATION" in refused.stderr
    unset = run_cli(
        "push", "set", group, "--url", e.url, "--topic", t, "--authorization-env", "NOPE",
        env=env,
    )  # fmt: skip
    assert unset.returncode == 2 and "NOPE is not set" in unset.stderr
    assert run_cli("push", "remove", group, env=env).returncode == 0
    gone = run_cli("push", "show", group, env=env)
    assert gone.returncode == 1 and "has no push" in gone.stderr


@pytest.mark.floors
def test_https_endpoints_are_verified_against_the_ca_bundle(proxy, topic, endpoint, tmp_path):
    """An endpoint whose certificate the proxy cannot verify gets nothing: its records are
    released, never sent in the clear; with the CA in --push-ca-bundle they go through."""
    ca = CertificateAuthority(tmp_path)
    e = endpoint(tls=ca.issue("hook", "localhost", server=True))
    t = topic(1)
    values = [b"secret-%d" % i for i in range(5)]
    untrusting = proxy(push_allowed_urls=e.url)
    _produce(untrusting.upstream, t, values, partitions=1)
    group = _group()
    assert _set_push(untrusting, group, url=e.url, topics=[t]).status_code == 201
    status = wait_for(
        lambda: (s := _status(untrusting, group))["endpoint"] == "down" and s, 30, "a TLS failure"
    )
    assert status["last_failure_status"] is None and not e.seen
    assert httpx.delete(f"{untrusting.admin_url}/v1/share-groups/{group}/push").status_code == 204
    untrusting.stop()

    trusting = proxy(push_allowed_urls=e.url, push_ca_bundle=str(ca.ca_file))
    trusted = _group()
    assert _set_push(trusting, trusted, url=e.url, topics=[t]).status_code == 201
    wait_for(lambda: len(e.accepted()) == 5, 30, "every record over https")


def test_a_refused_connection_releases_and_a_changed_url_takes_the_records(proxy, topic, endpoint):
    """Nothing listens at the first URL: each push is refused, the record released, the
    endpoint down; the push moved to a live endpoint delivers every record, none lost."""
    gone = endpoint()
    gone.stop()  # its port is free: connections to it are refused
    live = endpoint()
    t = topic(1)
    p = proxy(push_allowed_urls=f"{gone.url},{live.url}", delivery_count_limit=10)
    _produce(p.upstream, t, [b"r%d" % i for i in range(10)], partitions=1)
    group = _group()
    assert _set_push(p, group, url=gone.url, topics=[t]).status_code == 201
    status = wait_for(
        lambda: (s := _status(p, group))["endpoint"] == "down" and s, 30, "the refusals"
    )
    assert status["outcomes"]["timed_out"] >= 1 and status["outcomes"]["accepted"] == 0
    assert _set_push(p, group, url=live.url, topics=[t]).status_code == 200
    wait_for(lambda: len(live.accepted()) == 10, 30, "every record at the live endpoint")


def test_a_push_and_a_kafka_consumer_of_one_group_share_its_records(proxy, topic, endpoint):
    """The push is one more consumer of the group: a librdkafka ShareConsumer of the same group
    gets the records it does not, and no record goes to both."""
    t = topic(1)
    e = endpoint(lambda headers, body: Answer(200, delay_s=0.05))
    p = proxy(push_allowed_urls=e.url)
    count = 300
    _produce(p.upstream, t, [b"r%d" % i for i in range(count)], partitions=1)
    group = _group()
    consumer = share_consumer(p, group, mode="explicit")
    consumer.subscribe([t])
    assert _set_push(p, group, url=e.url, topics=[t], max_in_flight=4).status_code == 201
    consumed: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(consumed) + len(e.accepted()) < count and time.monotonic() < deadline:
            for m in consumer.poll(0.5) or []:
                assert m.error() is None, m.error()
                consumed.append(m.offset())
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            consumer.commit_sync()
    finally:
        consumer.close()
    pushed = {int(i.rsplit("/", 1)[1]) for i in e.accepted()}
    assert consumed and pushed, "both consumers of the group were handed records"
    assert not pushed & set(consumed), "no record went to both"
    assert pushed | set(consumed) == set(range(count))


def test_a_store_outage_pauses_the_push_without_a_traceback_and_loses_nothing(
    broker, postgres, topic, endpoint
):
    """The state store out of reach: the status is a 503 in one line, the pusher warns and
    retries, and once the store is back every record is accepted."""
    relay = TcpRelay(postgres.port).start()
    url = postgres.create_database(f"pushdown{uuid.uuid4().hex[:6]}", template="template_migrated")
    url = url.replace(f":{postgres.port}/", f":{relay.port}/")
    e = endpoint()
    p = ProxyProcess(broker.bootstrap, url, auto_offset_reset="earliest", push_allowed_urls=e.url)
    t = topic(1)
    group = _group()
    try:
        p.start()
        _produce(p.upstream, t, [b"a%d" % i for i in range(20)], partitions=1)
        assert _set_push(p, group, url=e.url, topics=[t]).status_code == 201
        wait_for(lambda: len(e.accepted()) == 20, 30, "the first records accepted")
        relay.cut()
        _produce(p.upstream, t, [b"b%d" % i for i in range(20)], partitions=1)
        r = httpx.get(f"{p.admin_url}/v1/share-groups/{group}/push", timeout=30)
        assert r.status_code == 503 and r.json()["error_code"] == "COORDINATOR_NOT_AVAILABLE"
        wait_for(lambda: "push cannot go on" in p.log(), 30, "the pusher to say it waits")
        relay.start()
        wait_for(lambda: len(e.accepted()) == 40, 60, "every record once the store is back")
    finally:
        p.stop()
        relay.cut()
    assert "Traceback" not in p.log(), p.log_path


def test_a_broker_outage_pauses_the_push_without_a_traceback_and_loses_nothing(postgres, endpoint):
    """The Kafka cluster stops answering (its process paused, connections hanging): the push
    waits without a traceback and without failing the endpoint, and once the cluster answers
    again every record is accepted, none twice."""
    broker = TansuBroker().start()
    url = postgres.create_database(f"pushkf{uuid.uuid4().hex[:6]}", template="template_migrated")
    e = endpoint()
    p = ProxyProcess(broker.bootstrap, url, auto_offset_reset="earliest", push_allowed_urls=e.url)
    group = _group()
    try:
        t = create_topic(broker.bootstrap, 1)
        p.start()
        _produce(broker.bootstrap, t, [b"a%d" % i for i in range(20)], partitions=1)
        assert _set_push(p, group, url=e.url, topics=[t]).status_code == 201
        wait_for(lambda: len(e.accepted()) == 20, 30, "the first records accepted")
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: _upstream_up(p) == 0, 60, "the proxy to find the cluster down")
            assert len(e.accepted()) == 20
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        _produce(broker.bootstrap, t, [b"b%d" % i for i in range(20)], partitions=1)
        wait_for(lambda: len(e.accepted()) == 40, 90, "every record once the cluster answers")
        ids = [x.id for x in e.seen if x.status == 200]
        assert len(ids) == len(set(ids)) == 40, "each record pushed once"
        assert _status(p, group)["endpoint"] == "up", "the cluster's outage is not the endpoint's"
    finally:
        p.stop()
        broker.stop()
    assert "Traceback" not in p.log(), p.log_path
