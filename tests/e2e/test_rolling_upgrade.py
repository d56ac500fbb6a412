"""A rolling upgrade of a fleet, as docs/operations/upgrades.md tells it: three nodes of an older
build serve share consumers on one Postgres while records flow; the new build's
`shareproxy migrate` runs under them; then one node at a time is stopped (SIGTERM) and started
again as the new build with its node id, so that for a while old and new nodes serve one store
together. Records flow through every node at each step, none is lost, every consumer carries on,
no node logs a traceback, and an old node started again on the migrated store refuses it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from shareproxy.demo.tansu import TansuBroker
from shareproxy.host import exits
from shareproxy.host.processes import wait_for_port
from shareproxy.persistence import migrate
from tests.support.cluster import LEASE_MS, wait_for_view
from tests.support.old_build import OldBuild, OldBuildMissing
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

# The old build: the last commit whose schema head is 0008, the parent of the commit that added
# migrations/versions/0009_share_group_push.py (a share group's push).
OLD_BUILD = "1fc65ffa3365fde64d36ec347e01f042e2f4b161"
OLD_HEAD = "0008"

NODES = 3
PARTITIONS = 6
NODE_OPTIONS: dict[str, object] = {
    "node_lease_ms": LEASE_MS,
    "auto_offset_reset": "earliest",
    "group_share_min_record_lock_duration_ms": 1000,  # below Kafka's 15 s floor: locks of 5 s
    "record_lock_duration_ms": 5000,
}
RATE = 300  # records produced a second, all through the run
FLOWING = 60  # records accepted on a node's partitions, after a change, to call it serving
STEP_S = 60  # the longest a step of the roll may take to show records flowing again


@pytest.fixture(scope="module")
def old_build(tmp_path_factory: pytest.TempPathFactory) -> OldBuild:
    try:
        return OldBuild.materialise(OLD_BUILD, tmp_path_factory.mktemp("old-build"))
    except OldBuildMissing as exc:
        pytest.fail(f"the rolling upgrade needs the old build from git: {exc}")


class Fleet:
    """Nodes on one store, old builds and new; each process started here is stopped at the
    end, and no node's log may hold a traceback or an error logged."""

    def __init__(self, broker: TansuBroker, url: str, old: OldBuild) -> None:
        self.broker, self.url, self.old = broker, url, old
        self.started: list[ProxyProcess] = []

    def node(self, node_id: int, **options: object) -> ProxyProcess:
        p = ProxyProcess(
            self.broker.bootstrap, self.url, node_id=node_id, **NODE_OPTIONS, **options
        )
        self.started.append(p)
        return p

    def start_old(self, nodes: list[ProxyProcess]) -> None:
        """Started together, as a fleet starts, each once both its ports listen."""
        for p in nodes:
            p.start(wait=False, env=self.old.env)
        for p in nodes:
            proc = p.proc
            assert proc is not None
            for port in (p.port, p.admin_port):
                wait_for_port(
                    port, 60, f"old node ({p.log_path})", lambda proc=proc: proc.poll() is None
                )

    def refusal(self, node_id: int, **options: object) -> tuple[int, str, str]:
        """An old node started on the store: its exit code, the lines it printed that are not
        INFO logs, and its whole output."""
        p = self.node(node_id, **options)
        p.start(wait=False, env=self.old.env)
        assert p.proc is not None
        try:
            code = p.proc.wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the old node serves the migrated store ({p.log_path})") from None
        finally:
            p.stop()
        said = [line for line in p.log().splitlines() if line.strip() and " INFO " not in line]
        return code, "\n".join(said), p.log()

    def stop(self) -> None:
        for p in self.started:
            p.stop()
        for p in self.started:
            log = p.log() if p.log_path.exists() else ""
            assert "Traceback" not in log, p.log_path
            assert " ERROR " not in log and '"level": "ERROR"' not in log, p.log_path


@pytest.fixture
def fleet(broker: TansuBroker, postgres: TemporaryPostgres, old_build: OldBuild) -> Iterator[Fleet]:
    url = postgres.create_database(f"roll_{uuid.uuid4().hex[:8]}")  # empty: the old build's
    f = Fleet(broker, url, old_build)
    try:
        yield f
    finally:
        f.stop()


@dataclass
class Flow:
    """Records produced all along (each value unique), and share consumers, one bootstrapped at
    each node, accepting them with explicit acknowledgements."""

    bootstrap: str
    topic: str
    nodes: list[ProxyProcess]
    group: str = field(default_factory=lambda: f"g-{uuid.uuid4().hex[:6]}")
    lock: threading.Lock = field(default_factory=threading.Lock)
    produced: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> where
    confirmed: dict[bytes, float] = field(default_factory=dict)  # value -> when first confirmed
    at: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> where delivered
    last_by_consumer: dict[int, float] = field(default_factory=dict)
    failed_commits: int = 0
    produce_errors: list[str] = field(default_factory=list)
    producing: threading.Event = field(default_factory=threading.Event)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Flow:
        self.producing.set()
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        for i, node in enumerate(self.nodes):
            c = ShareConsumer(
                {
                    "bootstrap.servers": node.bootstrap,
                    "group.id": self.group,
                    "share.acknowledgement.mode": "explicit",
                }
            )
            c.subscribe([self.topic])
            self.threads.append(threading.Thread(target=self._consume, args=(c, i), daemon=True))
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.producing.clear()
        self.stopping.set()
        for t in self.threads:
            t.join(60)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})

        def delivered(err: Any, msg: Any) -> None:
            with self.lock:
                if err is None:
                    self.produced[msg.value()] = (msg.partition(), msg.offset())
                else:
                    self.produce_errors.append(str(err))

        i, started = 0, time.monotonic()
        while self.producing.is_set():
            due = int((time.monotonic() - started) * RATE)
            while i < due:
                p.produce(
                    self.topic,
                    value=f"r{i}".encode(),
                    partition=i % PARTITIONS,
                    on_delivery=delivered,
                )
                i += 1
            p.poll(0.02)
        p.flush(30)

    def _consume(self, c: ShareConsumer, me: int) -> None:
        try:
            while not self.stopping.is_set():
                batch = [m for m in (c.poll(0.5) or []) if m.error() is None]
                if not batch:
                    continue
                for m in batch:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                try:
                    results = c.commit_sync(30)
                except Exception:  # nothing confirmed: these come again, or were accepted
                    with self.lock:
                        self.failed_commits += 1
                    continue
                ok = {tp.partition for tp, err in results.items() if err is None}
                now = time.monotonic()
                with self.lock:
                    for m in batch:
                        if m.partition() in ok:
                            self.confirmed.setdefault(m.value(), now)
                            self.at[m.value()] = (m.partition(), m.offset())
                            self.last_by_consumer[me] = now
        finally:
            c.close()

    def accepted_since(self, since: float, partitions: set[int]) -> int:
        with self.lock:
            return sum(
                1 for v, t in self.confirmed.items() if t > since and self.at[v][0] in partitions
            )

    def until_flowing(self, leaders: dict[int, int], since: float, what: str) -> None:
        """Until records produced to each node's partitions are accepted after ``since``."""
        deadline = time.monotonic() + STEP_S
        for node_id in sorted(set(leaders.values())):
            its = {p for p, leader in leaders.items() if leader == node_id}
            while self.accepted_since(since, its) < FLOWING:
                assert time.monotonic() < deadline, (
                    f"{what}: node {node_id}'s partitions {sorted(its)} had only "
                    f"{self.accepted_since(since, its)} records accepted"
                )
                time.sleep(0.1)

    def stored_starts(self, node: ProxyProcess) -> dict[int, int]:
        """Each share-partition's start offset in the store (SPSO): every record below it is
        acknowledged or archived."""
        url = f"{node.admin_url}/v1/share-groups/{self.group}/offsets"
        rows = httpx.get(url, timeout=10).json().get("partitions", [])
        return {r["partition"]: r["start_offset"] or 0 for r in rows}

    def until_all_accepted(self, node: ProxyProcess, timeout: float) -> dict[int, int]:
        """Once production has stopped: until every share-partition's start offset in the
        store is past its last record (nothing Acquired or Available is left below it); the
        end offsets. A record accepted there but never confirmed to its consumer had its
        answer cut by a node's stop: it is acknowledged all the same, and never comes again."""
        for t in self.threads[:1]:
            t.join(60)
        with self.lock:
            assert not self.produce_errors, self.produce_errors
            ends: dict[int, int] = {}
            for p, o in self.produced.values():
                ends[p] = max(ends.get(p, 0), o + 1)
        deadline = time.monotonic() + timeout
        while True:
            starts = self.stored_starts(node)
            if all(starts.get(p, 0) >= end for p, end in ends.items()):
                return ends
            with self.lock:
                unconfirmed = len(self.produced) - len(self.confirmed)
            assert time.monotonic() < deadline, (
                f"not all accepted: {unconfirmed} unconfirmed; stored starts {starts}, ends {ends}"
            )
            time.sleep(0.2)


def _new_build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )


def _serves_push(node: ProxyProcess) -> bool:
    """Whether the node's admin API has the push resource, which only the new build has."""
    paths = httpx.get(f"{node.admin_url}/openapi.json", timeout=10).json()["paths"]
    return any(p.endswith("/push") for p in paths)


def _spread_topic(topic: Callable[..., str], nodes: list[ProxyProcess]) -> tuple[str, dict]:
    """A topic each node leads a partition of (placement is by topic id)."""
    for _ in range(20):
        t = topic(PARTITIONS)
        leaders = wait_for_view(nodes, t)
        if len(set(leaders.values())) == len(nodes):
            return t, leaders
    raise AssertionError("no topic spread over every node in 20 tries")


@pytest.mark.long
def test_a_fleet_upgraded_one_node_at_a_time_serves_throughout_and_loses_nothing(
    fleet: Fleet, old_build: OldBuild, broker: TansuBroker, postgres: TemporaryPostgres, topic
):
    url = fleet.url
    # the old build is what runs: its own package and schema, and its own migrate
    where, head = old_build.imported()
    assert where.is_relative_to(old_build.root) and head == OLD_HEAD, (where, head)
    created = old_build.shareproxy("migrate", "--state-url", url)
    assert created.returncode == 0 and f"to revision {OLD_HEAD}" in created.stdout, created

    nodes = [fleet.node(i) for i in range(1, NODES + 1)]
    fleet.start_old(nodes)
    # started with --migrate, the default: a node of the new build would have moved the store on
    assert migrate.schema_status(url)[0] == OLD_HEAD
    assert not any(map(_serves_push, nodes))

    t, leaders = _spread_topic(topic, nodes)
    with Flow(broker.bootstrap, t, nodes) as flow:
        since = time.monotonic()
        flow.until_flowing(leaders, since, "the old fleet")

        # 1. the new build's migrate, under the serving old fleet
        migrated = _new_build("migrate", "--state-url", url)
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        assert f"to revision {migrate.SCHEMA_HEAD}" in migrated.stdout
        assert _new_build("migrate", "--check", "--state-url", url).returncode == 0
        flow.until_flowing(leaders, time.monotonic(), "the old fleet on the migrated store")

        # 2. one node at a time, the highest id first (as a StatefulSet rolls)
        for step, node in enumerate(reversed(nodes)):
            stopped = time.monotonic()
            assert node.stop() == 0  # SIGTERM: it commits, leaves, and exits 0
            if step == 0:
                _old_node_restarted_is_refused(fleet, int(str(node.options["node_id"])))
            node.start()  # the new build, same node id and ports
            assert _serves_push(node)
            now_leaders = wait_for_view(nodes, t)
            old = NODES - 1 - step
            if old:  # while any old node is live, every node places by the old build's rule
                assert now_leaders == leaders
            else:  # then by the new build's: each node leads as many partitions
                assert sorted(Counter(now_leaders.values()).values()) == [2, 2, 2], now_leaders
                leaders = now_leaders
            flow.until_flowing(leaders, time.monotonic(), f"{old} old and {step + 1} new nodes")
            print(
                f"node {node.options['node_id']} replaced: every node serving again after "
                f"{time.monotonic() - stopped:.1f} s ({old} old, {step + 1} new)"
            )
        rolled = time.monotonic()
        flow.until_flowing(leaders, rolled, "the new fleet")
        while min(flow.last_by_consumer.get(i, 0) for i in range(NODES)) <= rolled:
            assert time.monotonic() < rolled + STEP_S, (
                f"a consumer stalled: {flow.last_by_consumer}"
            )
            time.sleep(0.1)
        flow.producing.clear()
        ends = flow.until_all_accepted(nodes[0], 120)

    assert sum(ends.values()) == len(flow.produced) > RATE * 10
    # given up on: none (an archived record is below the start offset, yet was not accepted)
    database = url.rsplit("/", 1)[1]
    assert postgres.psql("SELECT count(*) FROM share_archived", database).strip() == "0"
    unconfirmed = set(flow.produced) - set(flow.confirmed)
    print(
        f"{len(flow.produced)} records through the roll, every one accepted; "
        f"{flow.failed_commits} commits failed, {len(unconfirmed)} acceptances not confirmed"
    )


def _old_node_restarted_is_refused(fleet: Fleet, node_id: int) -> None:
    """An old node started again once the store is migrated: with --migrate (the default) and
    with --no-migrate, it refuses the newer store in one line and exits 3, serving nothing."""
    for options in ({}, {"migrate": False}):
        code, said, log = fleet.refusal(node_id, **options)
        print(f"old node, {options or 'defaults'}: exit {code}: {said}")
        assert code == exits.UNAVAILABLE, log
        assert len(said.splitlines()) == 1 and said.startswith("error: "), log
        assert fleet.url in said and migrate.SCHEMA_HEAD in said, said
        assert "Traceback" not in log
    assert migrate.schema_status(fleet.url)[0] == migrate.SCHEMA_HEAD
