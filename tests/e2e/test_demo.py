"""The README's first command: ``shareproxy demo`` shows several consumers sharing one
partition, each record settled exactly once, redeliveries visible; its progress is not broken
by librdkafka's log, it stops promptly and leaves nothing behind."""

import gc
import io
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from shareproxy.demo.single import run_demo


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of the demo's own, in this process and its children: other tests'
    brokers come and go in the shared one meanwhile, so only this one can show leftovers."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def test_the_demo_shares_one_partition_and_cleans_up(capfd, own_tmp):
    # a client an earlier test of this worker left to the collector logs from librdkafka's
    # threads until it is freed (to a broker that test stopped): freed now, and what it wrote
    # before the demo is not the demo's
    gc.collect()
    capfd.readouterr()
    out = io.StringIO()
    outcome = run_demo(records=300, partitions=1, consumers=3, console=Console(file=out, width=200))
    text = out.getvalue()
    assert outcome.ok, text
    assert outcome.consumers_of(0) == {1, 2, 3}, text  # one partition, three consumers on it
    for c in (1, 2, 3):
        [row] = [line for line in text.splitlines() if line.startswith(f"│ consumer-{c} ")]
        assert any(ch.isdigit() for ch in row.split("│")[2]), row  # its offsets of partition 0
    redelivered = [d for d in outcome.deliveries if d.delivery_count > 1]
    assert redelivered and "redeliveries: released, then delivered again" in text
    assert "every one of the 300 records was accepted or rejected exactly once" in text
    assert outcome.client_log, "librdkafka's lines were neither shown nor kept"
    printed = capfd.readouterr()
    assert "rdkafka" not in printed.err + printed.out  # none of it reached the terminal
    assert outcome.stop_seconds < 3, outcome.stop_seconds
    assert sorted(own_tmp.iterdir()) == []  # its broker's and its state's folders are gone


def _interrupted(after: str, records: int) -> tuple[int, str, float]:
    """``shareproxy demo`` sent Ctrl-C once ``after`` appears in its output: its exit code,
    what it printed after the interrupt, and how long it took to stop."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "shareproxy.cli", "demo", "--records", str(records)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if after in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(90), "".join(lines)
        mark = len(lines)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        code = proc.wait(20)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(5)
    return code, "".join(lines[mark:]), took


def test_ctrl_c_stops_the_demo_within_seconds_with_one_line(own_tmp):
    for after, records in (("consumers in", 200_000), ("proxy", 200_000)):
        code, said, took = _interrupted(after, records)
        assert code == 130, said
        assert took < 10, took
        assert "Unable connect" not in said and "Traceback" not in said, said
        assert len([line for line in said.splitlines() if line.strip()]) <= 3, said
        assert "interrupted" in said, said
    assert sorted(own_tmp.iterdir()) == []  # its broker's and its state's folders are gone


@pytest.mark.long
def test_the_fleet_demo_kills_a_node_and_loses_no_record():
    """``shareproxy demo --nodes 3``: three real nodes on one real Postgres, one SIGKILLed
    mid-run; the others serve its partitions and the store holds every record acknowledged."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    # its own temporary folder, which others' runs do not write to; the server user (as root,
    # `postgres`) reaches its cluster there
    tmp = Path(tempfile.mkdtemp(prefix="fleet-demo-"))
    tmp.chmod(0o755)
    proc = subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "demo", "--nodes", "3", "--records", "600"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "120", "TMPDIR": str(tmp)},
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    killed = re.search(r"killed +node (\d) \(SIGKILL\) at \d+ of 600 acknowledged", said)
    assert killed, said
    served = re.search(r"failover +partitions? [\d, ]+ served again by nodes? ([\d, ]+) ", said)
    assert served and killed.group(1) not in served.group(1).split(", "), said
    assert "no record lost: 600 produced, 600 acknowledged" in said, said
    assert "Traceback" not in said, said
    left = sorted(p.name for p in tmp.iterdir())
    shutil.rmtree(tmp)
    assert left == [], left  # the broker's, the store's and the nodes' folders all removed
