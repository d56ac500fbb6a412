"""Fuzzing a live proxy: frames generated from the kio schemas of every served API version,
sent as they are, mutated or replaced by garbage (tests/support/fuzz.py), REST calls
generated from the proxy's own OpenAPI document (schemathesis), and records API bodies for the
test's topic, valid or mutated, while their groups are deleted — while a real ShareConsumer
consumes and a producer produces through the same proxy.

Passes when the process stays up, logs no error or traceback (the fixture's check), never
answers REST with a 5xx, and the consumer receives every record exactly once; the upstream
broker still answers at the end (relayed requests the proxy lets through wedged none), every
relayed API the upstream speaks got answers, and the fuzzing rate of the last seconds has not
collapsed against the first (the listener did not stall behind a sick upstream). CI runs a short
fixed budget; set SHAREPROXY_FUZZ_SECONDS, SHAREPROXY_FUZZ_REST_EXAMPLES and
SHAREPROXY_FUZZ_RECORDS_SECONDS to run longer.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from shareproxy.demo.tansu import TansuBroker
from shareproxy.kafka.dispatch import OWN, SERVED
from shareproxy.protocol.api_keys import ApiKey
from tests.support.consumers import share_consumer
from tests.support.fuzz import FrameFuzzer, api_keys, broker_answers, frame_pool, fuzz_records

SECONDS = float(os.environ.get("SHAREPROXY_FUZZ_SECONDS", "20"))
REST_EXAMPLES = int(os.environ.get("SHAREPROXY_FUZZ_REST_EXAMPLES", "25"))
RECORDS_SECONDS = float(os.environ.get("SHAREPROXY_FUZZ_RECORDS_SECONDS", "10"))
RECORDS = 5_000
TIMEOUT = (
    SECONDS + RECORDS_SECONDS + 240
)  # the fuzzing itself, then the REST calls and the consumer catching up


@pytest.fixture(scope="module")
def own_broker():
    """A broker of its own: fuzzed Produce and Fetch requests reach it."""
    b = TansuBroker().start()
    yield b
    b.stop()


# Every API the proxy handles, but CreateTopics: the proxy refuses what Kafka's controller refuses
# (names, two billion partitions: tests/unit/test_routes.py) and passes on the rest, and the test
# broker carrying out requests for thousands of partitions, one after another, soon answers the
# proxy's own Metadata too slowly for readiness: that measures the broker, not the proxy.
FUZZED = {k: v for k, v in SERVED.items() if k != ApiKey.CREATE_TOPICS}
# the last seconds' rate may fall to this share of the first seconds' before the test fails
RATE_KEPT = 0.25
RATE_WINDOW_S = 5


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.long
def test_fuzzed_frames_and_rest_calls_leave_the_proxy_up_and_a_consumer_whole(own_broker, postgres):
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.proxy import ProxyProcess

    topic = f"fuzz-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    url = postgres.create_database(f"fz{uuid.uuid4().hex[:6]}", template="template_migrated")
    p = ProxyProcess(own_broker.bootstrap, url, auto_offset_reset="earliest").start()
    stop = threading.Event()  # set whatever happens: a consumer left polling keeps pytest alive
    consumer = None
    try:
        _produce(own_broker.bootstrap, topic, range(RECORDS // 2))
        seen: list[tuple[int, int]] = []
        consumer = threading.Thread(target=_consume, args=(p, topic, seen, stop), daemon=True)
        consumer.start()
        producer = threading.Thread(
            target=_produce, args=(p.bootstrap, topic, range(RECORDS // 2, RECORDS)), daemon=True
        )
        producer.start()

        pool = frame_pool(FUZZED)
        stats = asyncio.run(FrameFuzzer(p.port, pool, seed=int(time.time())).run(SECONDS))
        first, last = stats.rates(RATE_WINDOW_S)
        print(
            f"\nframe fuzzing: {stats.cases} cases in {stats.seconds:.1f}s "
            f"({stats.rate:.0f}/s, first {first:.0f}/s, last {last:.0f}/s; answered "
            f"{stats.answered}, closed {stats.closed}, held {stats.held}; {stats.kinds})"
        )
        assert asyncio.run(broker_answers(own_broker.port)), "the upstream broker is wedged"
        assert last >= RATE_KEPT * first, f"fuzzing fell from {first:.0f}/s to {last:.0f}/s"
        relayed = asyncio.run(api_keys(p.port)) - OWN - {ApiKey.CREATE_TOPICS}
        unanswered = relayed - stats.answered_by_api.keys()
        assert not unanswered, f"no relayed request of api keys {sorted(unanswered)} answered"
        rest_cases = _fuzz_rest(p.admin_url)
        print(f"REST fuzzing: {rest_cases} calls, none answered 5xx")
        statuses, failures = asyncio.run(
            fuzz_records(p.admin_url, topic, RECORDS_SECONDS, seed=int(time.time()))
        )
        print(f"records API fuzzing: {dict(statuses)}")
        assert not failures, "\n".join(failures[:20])

        producer.join(60)
        deadline = time.monotonic() + 90
        while len(seen) < RECORDS and time.monotonic() < deadline:
            time.sleep(0.2)
        stop.set()
        consumer.join(30)
        assert p.proc is not None and p.proc.poll() is None, "the proxy died"
        assert len(seen) == RECORDS, f"{len(seen)} deliveries, {len(set(seen))} distinct"
        assert len(set(seen)) == RECORDS
    finally:
        stop.set()
        if consumer is not None:
            consumer.join(30)
        p.stop()
    problems = [
        line for line in p.log().splitlines() if " ERROR " in line or line.startswith("Traceback")
    ]
    assert not problems, f"the proxy logged errors ({p.log_path}):\n" + "\n".join(problems[:40])


def _produce(bootstrap: str, topic: str, numbers: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failed: list[str] = []
    for i in numbers:
        producer.produce(
            topic,
            f"r{i}".encode(),
            partition=i % 2,
            on_delivery=lambda e, _: e and failed.append(e),
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failed == []


def _consume(p, topic: str, seen: list, stop: threading.Event) -> None:
    consumer = share_consumer(p, f"fuzz-real-{uuid.uuid4().hex[:6]}")
    consumer.subscribe([topic])
    while not stop.is_set():
        for m in consumer.poll(0.5) or []:
            assert m.error() is None, m.error()
            seen.append((m.partition(), m.offset()))
    consumer.commit_sync()
    consumer.close()


def _fuzz_rest(admin_url: str) -> int:
    """Every operation of the OpenAPI document with generated inputs; a 5xx fails."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.checks import not_a_server_error

    schema = schemathesis.openapi.from_url(f"{admin_url}/openapi.json")
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=REST_EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def call(case: schemathesis.Case) -> None:
            nonlocal calls
            calls += 1
            case.call_and_validate(checks=[not_a_server_error])

        call()
    return calls
