"""The proxy's CPU time, the figure machines agree on: ratios swing with what else a small
machine runs, while the CPU a proxy process spends per record delivered barely does."""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> tuple[float, float]:
    """(user, system) CPU of these processes (all their threads), from ``/proc`` (Linux)."""
    user = system = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        user += int(fields[11]) / _TICKS
        system += int(fields[12]) / _TICKS
    return user, system


class CpuPerRecord:
    """``with CpuPerRecord(pids) as cpu: ...`` then ``cpu.per_record_us(records)``."""

    def __init__(self, pids: Iterable[int]) -> None:
        self.pids = list(pids)
        self.user = self.system = 0.0

    def __enter__(self) -> CpuPerRecord:
        self._start = cpu_seconds(self.pids)
        return self

    def __exit__(self, *exc: object) -> None:
        user, system = cpu_seconds(self.pids)
        self.user, self.system = user - self._start[0], system - self._start[1]

    @property
    def seconds(self) -> float:
        return self.user + self.system

    def per_record_us(self, records: int) -> float:
        return self.seconds * 1e6 / records if records else float("nan")

    def system_share(self) -> float:
        """The part of it spent in the kernel: socket reads and writes, mostly."""
        return self.system / self.seconds if self.seconds else float("nan")
