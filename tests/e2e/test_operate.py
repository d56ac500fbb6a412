"""Running it: SIGTERM during consumption loses nothing and redelivers only what was not
acknowledged; JSON logs are one object per line, name the events and hold no secrets."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, KafkaException

from shareproxy.host.processes import free_port
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


@pytest.mark.floors
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


@pytest.mark.floors
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
    loaded = [e for e in entries if e["message"] == "share-partition loaded"]
    assert loaded and (loaded[0]["group"], loaded[0]["topic"], loaded[0]["partition"]) == (
        group,
        t,
        0,
    )
    assert secret not in p.log()
    assert not [e for e in entries if e["level"] == "ERROR"]


@pytest.mark.floors
@pytest.mark.parametrize("command", ["serve", "migrate"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_starting_exits_cleanly_with_one_line(tmp_path, command, sig):
    """serve stopped is done (exit 0), at any moment; an interrupted migrate is not (128 + the
    signal, as a shell reports it) unless it had finished; never a traceback or a death by the
    signal itself."""
    for i, delay in enumerate((0, 0.3, 0.7, 1.2, 1.6, 2.0)):
        args = [sys.executable, "-m", "shareproxy.cli", command]
        args += ["--state-url", f"sqlite:///{tmp_path}/state{i}.db"]
        if command == "serve":  # an upstream that refuses: it retries, starting, until stopped
            args += ["--bootstrap-servers", f"127.0.0.1:{free_port()}"]
            args += ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        _until_caught(proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        what = f"{command}, {sig.name} after {delay} s: exit {proc.returncode}\n{err}"
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, what
        if command == "serve":
            assert proc.returncode == 0, what
            last = err.strip().splitlines()[-1]
            # the CLI's own line, or the log's "stopped" with how long the stop took
            assert last in (f"stopped by {sig.name} while starting", "stopped") or re.search(
                r" stopped( seconds=[0-9.]+)?$", last
            ), what
        elif proc.returncode == 0:  # the signal came once it had migrated
            assert out.startswith("migrated ") and err == "", what
        else:
            assert proc.returncode == 128 + sig, what
            assert err == f"error: interrupted by {sig.name}\n", what


@pytest.mark.floors
def test_a_stop_while_migrate_waits_on_a_locked_store_exits_at_once(tmp_path):
    """A stop that lands while a store connection is open (here, one waiting on a lock another
    process holds) ends the command at once: the driver's worker thread, blocked where the stop
    left it, must not keep the process alive."""
    db = tmp_path / "state.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        url = f"sqlite:///{db}?timeout=60"  # the lock is waited on past any test's patience
        args = [sys.executable, "-m", "shareproxy.cli", "migrate", "--state-url", url]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _until_caught(proc)
        # the command's own and its stop watchdog, then the store driver's worker: whatever it
        # asks waits on the lock
        _until_threads(proc, 3)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            out, err = proc.communicate(timeout=10)
            took = time.monotonic() - sent
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError("migrate stopped while on a locked store never exited") from None
    finally:
        holder.rollback()
        holder.close()
    stopped = (128 + signal.SIGINT, "", "error: interrupted by SIGINT\n")
    assert (proc.returncode, out, err) == stopped
    assert took < 5, f"exited {took:.1f} s after the stop, not at once"  # held off: 6 s


def _until_threads(proc: subprocess.Popen[str], count: int) -> None:
    deadline = time.monotonic() + 30
    while len(list(Path(f"/proc/{proc.pid}/task").iterdir())) < count:
        assert proc.poll() is None, f"exited {proc.returncode} before opening the store"
        assert time.monotonic() < deadline, f"never ran {count} threads"
        time.sleep(0.005)


def _until_caught(proc: subprocess.Popen[str]) -> None:
    """Until the command catches SIGTERM (Linux), which it does first thing with SIGINT: before
    that, in the interpreter's own start, no program can (Python's SIGINT handler is there
    from the start, and raises KeyboardInterrupt wherever the start is)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() is None:  # (or it is done)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
        if caught >> (signal.SIGTERM - 1) & 1:
            return
        time.sleep(0.001)
    assert proc.poll() is not None, "SIGTERM never caught"
