"""The fleet demo's proxy nodes: ``shareproxy serve`` processes on one store, each started with
the command line ``serve --nodes N`` gives its nodes, and what the demo asks of them over their
admin API (ready, agreed on the live nodes, who leads what, the store's offsets)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from shareproxy.demo.parts import ClientLog, StopRequests
from shareproxy.host.processes import free_port, spawn, stop_process
from shareproxy.node.commands import node_command

READY_S = 60  # for every node to serve and agree on the live nodes
ASK_TIMEOUT_S = 5  # one admin API call


class FleetFailed(RuntimeError):
    """The nodes could not be started, or did not come to serve together: said in one line."""


def shown_list(items: Sequence[int]) -> str:
    return ", ".join(map(str, items))


class Fleet:
    """``with Fleet(…) as fleet: fleet.start(stop)``: node ids 1…n on loopback ports, their
    output in ``workdir``; SIGTERMed on the way out (a killed one is already gone)."""

    def __init__(
        self, bootstrap: str, state_url: str, nodes: int, lease_ms: int, workdir: Path
    ) -> None:
        self.state_url = state_url
        self.ids = list(range(1, nodes + 1))
        self.ports = {n: free_port() for n in self.ids}
        self.admin = {n: f"http://127.0.0.1:{free_port()}" for n in self.ids}
        self.bootstraps = [f"127.0.0.1:{self.ports[n]}" for n in self.ids]
        self.workdir = workdir
        self.flags: dict[str, Any] = {
            "bootstrap_servers": bootstrap,
            "state_url": state_url,
            "auto_offset_reset": "earliest",
            "node_lease_ms": lease_ms,
            "auto_migrate": False,  # migrated once, here: nodes upgrading at once would race
        }
        self.client_log = ClientLog()  # the metadata client's lines, off the screen
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.killed: set[int] = set()

    def start(self, stop: StopRequests) -> None:
        self._migrate()
        for n in self.ids:
            stop.check()
            overrides = {
                "node_id": n,
                "nodes": 1,
                "listen": f"127.0.0.1:{self.ports[n]}",
                "admin_listen": self.admin[n].removeprefix("http://"),
            }
            with (self.workdir / f"node-{n}.log").open("wb") as log:
                command = node_command(self.flags, None, overrides)
                self.procs[n] = spawn(command.argv, log, command.environment())
        deadline = time.monotonic() + READY_S
        while not self._agreed():
            stop.check()
            for n, proc in self.procs.items():
                if proc.poll() is not None:
                    raise FleetFailed(f"node {n} exited ({proc.returncode}): {self._tail(n)}")
            if time.monotonic() > deadline:
                raise FleetFailed(f"the nodes did not all serve within {READY_S} s")
            time.sleep(0.2)

    def _migrate(self) -> None:
        from shareproxy.persistence import migrate
        from shareproxy.persistence.engine import shown_url, store_errors

        with store_errors(shown_url(self.state_url)):
            migrate.upgrade(self.state_url)

    def _agreed(self) -> bool:
        """Every node ready and seeing every node live, at one generation of the cluster."""
        seen = set()
        for n in self.ids:
            try:
                answer = httpx.get(f"{self.admin[n]}/readyz", timeout=ASK_TIMEOUT_S)
            except httpx.HTTPError:
                return False
            node = answer.json()["node"]
            if answer.status_code != 200 or node["live_nodes"] != self.ids:
                return False
            seen.add(node["generation"])
        return len(seen) == 1

    def addresses(self) -> str:
        return ", ".join(self.bootstraps)

    def live(self) -> list[int]:
        return [n for n in self.ids if n not in self.killed]

    def leaders(self, topic: str) -> dict[int, int]:
        """Each partition's leader, as the nodes tell clients (Metadata)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstraps[0], **self.client_log.config})
        md = admin.list_topics(topic, timeout=20)
        return {p.id: p.leader for p in md.topics[topic].partitions.values()}

    def wait_for_members(self, group: str, count: int, stop: StopRequests) -> None:
        """Until the group has ``count`` members, each with an assignment."""
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            stop.check()
            try:
                answer = self._ask(f"/v1/share-groups/{group}")
                members = answer.get("members", [])
                if len(members) >= count and all(m["assignment"] for m in members):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)
        raise FleetFailed(f"{count} consumers did not join {group!r} within {READY_S} s")

    def kill(self, node: int) -> None:
        self.killed.add(node)
        self.procs[node].kill()
        self.procs[node].wait(10)

    def stored_offsets(self, group: str, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        """Per partition, the store's start offset (SPSO: every record below it acknowledged)
        and the high watermark (every record produced), asked of a live node."""
        deadline = time.monotonic() + READY_S
        while True:
            try:
                rows = self._offsets(group, topic)
                return (
                    {r["partition"]: r["start_offset"] or 0 for r in rows},
                    {r["partition"]: r["high_watermark"] or 0 for r in rows},
                )
            except (httpx.HTTPError, ValueError, KeyError):
                if time.monotonic() > deadline:
                    return {}, {}
                time.sleep(0.2)

    def all_accepted(self, group: str, topic: str, records: int) -> bool:
        try:
            rows = self._offsets(group, topic)
        except (httpx.HTTPError, ValueError, KeyError):
            return False  # its coordinator is moving: asked again
        return sum(r["start_offset"] or 0 for r in rows) >= records

    def _offsets(self, group: str, topic: str) -> list[dict[str, Any]]:
        """The share-partitions of ``topic`` as it is now (a store shared with an earlier run
        may hold those of a deleted topic of the same name, named "" by the proxy)."""
        rows = self._ask(f"/v1/share-groups/{group}/offsets?topic={topic}")["partitions"]
        return [r for r in rows if r["topic"] == topic]

    def led_now(self, group: str) -> dict[int, int]:
        """Which live node leads each partition's share-partition of ``group`` (/readyz)."""
        led: dict[int, int] = {}
        for n in self.live():
            try:
                answer = httpx.get(f"{self.admin[n]}/readyz", timeout=ASK_TIMEOUT_S).json()
            except (httpx.HTTPError, ValueError):
                continue  # not said: shown as unknown
            for key in answer["node"]["share_partitions_led"]:
                if key.startswith(f"{group}/"):
                    led[int(key.rsplit("/", 1)[1])] = n
        return led

    def _ask(self, path: str) -> Any:
        """A GET on the first live node's admin API (passed on to the group's coordinator)."""
        answer = httpx.get(f"{self.admin[self.live()[0]]}{path}", timeout=ASK_TIMEOUT_S)
        answer.raise_for_status()
        return answer.json()

    def _tail(self, node: int, lines: int = 20) -> str:
        path = self.workdir / f"node-{node}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def log(self) -> list[str]:
        """The nodes' last lines, for a run that went wrong."""
        nodes = [f"node {n}: {line}" for n in self.ids for line in self._tail(n).splitlines()]
        return self.client_log.lines + nodes

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            stop_process(proc)
