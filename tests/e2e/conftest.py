"""Real parts: a Tansu broker subprocess (one per session), a real Postgres (a fresh database
per test), shareproxy as a subprocess, and confluent-kafka's ShareConsumer."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess
from tests.support.tansu import TansuBroker, TansuUnavailable

_db = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[TansuBroker]:
    try:
        b = TansuBroker().start()
    except (TansuUnavailable, RuntimeError) as exc:
        pytest.fail(f"the Tansu test broker could not start: {exc}")
    yield b
    b.stop()


@pytest.fixture
def topic(broker: TansuBroker) -> Callable[..., str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def make(partitions: int = 3) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            f.result(30)
        return name

    return make


@pytest.fixture
def produce(broker: TansuBroker) -> Callable[..., list[tuple[int, int]]]:
    from confluent_kafka import Producer

    def send(topic: str, count: int, partitions: int = 3, size: int = 100) -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(count):
            p.produce(topic, key=str(i).encode(), value=b"v" * size, partition=i % partitions)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(30) == 0

    return send


@pytest.fixture
def proxy(
    broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[..., ProxyProcess]]:
    started: list[ProxyProcess] = []

    def start(**options: object) -> ProxyProcess:
        url = postgres.create_database(f"e2e{next(_db)}", template="template_migrated")
        options.setdefault("auto_offset_reset", "earliest")
        p = ProxyProcess(broker.bootstrap, url, **options).start()
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()
    for p in started:  # a proxy that logged an error failed the test, whatever clients saw
        problems = [
            line
            for line in p.log().splitlines()
            if " ERROR " in line or '"level": "ERROR"' in line or line.startswith("Traceback")
        ]
        assert not problems, f"the proxy logged errors ({p.log_path}):\n" + "\n".join(problems)
