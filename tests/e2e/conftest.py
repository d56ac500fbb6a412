"""Real parts: a Tansu broker subprocess (one per session), a real Postgres (a fresh database
per test), shareproxy as a subprocess, and confluent-kafka's ShareConsumer."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shareproxy.demo.tansu import TansuBroker, TansuUnavailable
from tests.support.cluster import LEASE_MS
from tests.support.java import JavaPrograms, JavaUnavailable
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess
from tests.support.push_endpoint import Answer, PushEndpoint
from tests.support.s3 import S3Server, TansuObjects
from tests.support.secure import Secure, secure_proxy
from tests.support.topics import create_topic
from tests.support.topics import produce as produce_records

_db = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[TansuBroker]:
    try:
        b = TansuBroker().start()
    except (TansuUnavailable, RuntimeError) as exc:
        pytest.fail(f"the Tansu test broker could not start: {exc}")
    try:
        yield b
    finally:
        b.stop()


def _topics(broker: TansuBroker) -> Callable[..., str]:
    def make(partitions: int = 3) -> str:
        return create_topic(broker.bootstrap, partitions)

    return make


@pytest.fixture
def topic(broker: TansuBroker) -> Callable[..., str]:
    return _topics(broker)


@pytest.fixture
def produce(broker: TansuBroker) -> Callable[..., None]:
    def send(topic: str, count: int, partitions: int = 3, size: int = 100) -> None:
        produce_records(broker.bootstrap, topic, count, partitions, size)

    return send


def _proxies(
    broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[..., ProxyProcess]]:
    started: list[ProxyProcess] = []

    def start(**options: object) -> ProxyProcess:
        url = postgres.create_database(f"e2e{next(_db)}", template="template_migrated")
        options.setdefault("auto_offset_reset", "earliest")
        # tests time out locks in a second or two: below Kafka's 15 s minimum
        options.setdefault("group_share_min_record_lock_duration_ms", 1000)
        p = ProxyProcess(broker.bootstrap, url, **options)
        started.append(p)  # before it starts: stopped below whatever happens
        return p.start()

    try:
        yield start
    finally:
        for p in started:
            p.stop()
    for p in started:  # a proxy that logged an error failed the test, whatever clients saw
        problems = [
            line
            for line in p.log().splitlines()
            if " ERROR " in line or '"level": "ERROR"' in line or line.startswith("Traceback")
        ]
        assert not problems, f"the proxy logged errors ({p.log_path}):\n" + "\n".join(problems)


@pytest.fixture
def proxy(
    broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[..., ProxyProcess]]:
    yield from _proxies(broker, postgres)


@pytest.fixture
def endpoint() -> Iterator[Callable[..., PushEndpoint]]:
    started: list[PushEndpoint] = []

    def start(
        answer: Callable[..., Answer] | None = None, tls: tuple[Path, Path] | None = None
    ) -> PushEndpoint:
        e = PushEndpoint(answer or (lambda headers, body: Answer()), tls)
        started.append(e)
        return e.start()

    yield start
    for e in started:
        e.stop()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """An S3 server for a second broker whose log the tests can cut (see tests.support.s3)."""
    try:
        server = S3Server().start()
    except (ImportError, RuntimeError) as exc:
        pytest.fail(f"the S3 server for Tansu's S3 storage could not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_broker(s3: S3Server) -> Iterator[TansuBroker]:
    try:
        b = s3.broker().start()
    except (TansuUnavailable, RuntimeError) as exc:
        pytest.fail(f"the Tansu broker on S3 storage could not start: {exc}")
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def s3_objects(s3: S3Server, s3_broker: TansuBroker) -> TansuObjects:
    return TansuObjects(s3, s3_broker)


@pytest.fixture
def s3_topic(s3_broker: TansuBroker) -> Callable[..., str]:
    return _topics(s3_broker)


@pytest.fixture
def s3_proxy(
    s3_broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[..., ProxyProcess]]:
    yield from _proxies(s3_broker, postgres)


@pytest.fixture(scope="session")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    """tests/e2e/java compiled once against kafka-clients 4.3.0."""
    try:
        return JavaPrograms(Path(__file__).parent / "java", tmp_path_factory.mktemp("java"))
    except JavaUnavailable as exc:
        pytest.fail(f"the Java client tests need a JDK and kafka-clients: {exc}")


@pytest.fixture
def cluster(
    broker: TansuBroker, postgres: TemporaryPostgres
) -> Iterator[Callable[..., list[ProxyProcess]]]:
    started: list[ProxyProcess] = []

    def start(n: int, via: dict[int, int] | None = None, **options: object) -> list[ProxyProcess]:
        """n nodes on one store; ``via`` maps a node id to the port it reaches Postgres by."""
        url = postgres.create_database(f"cluster_{uuid.uuid4().hex[:8]}", "template_migrated")
        base = f"127.0.0.1:{postgres.port}/"
        nodes = [
            ProxyProcess(
                broker.bootstrap,
                url.replace(base, f"127.0.0.1:{(via or {}).get(i, postgres.port)}/"),
                node_id=i,
                **{
                    "node_lease_ms": LEASE_MS,
                    "auto_offset_reset": "earliest",
                    "group_share_min_record_lock_duration_ms": 1000,
                    "record_lock_duration_ms": 5000,
                    **options,
                },
            )
            for i in range(1, n + 1)
        ]
        started.extend(nodes)
        for node in nodes:
            node.start()
        return nodes

    try:
        yield start
    finally:
        for p in started:
            p.stop()
    for p in started:  # a store out of reach is logged as a warning, never a defect
        assert "Traceback" not in p.log(), p.log_path
        assert " ERROR " not in p.log(), p.log_path


@pytest.fixture(scope="module")
def secure(
    broker: TansuBroker, postgres: TemporaryPostgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secure]:
    """A proxy with SASL, TLS and ACLs on, one per test module."""
    yield from secure_proxy(broker.bootstrap, postgres, tmp_path_factory.mktemp("tls"))
