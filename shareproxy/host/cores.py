"""The cores this process may use, for ``serve --nodes auto``: the CPUs it may run on (its
affinity, as ``taskset`` or a cpuset sets it), fewer where its cgroup's CPU limit allows less (a
container's ``--cpus``, a Kubernetes CPU limit: ``cpu.max`` of the cgroup v2 the process sees as
its root inside a container). A node is one event loop, so one node per core is what a machine
can run at full speed."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def cpu_limit(cpu_max: str) -> int | None:
    """Whole cores a cgroup v2 ``cpu.max`` (``QUOTA PERIOD``, or ``max PERIOD``) allows, a
    fraction rounded up; None without a limit or on text it cannot read."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))


def usable_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        limit = cpu_limit(cpu_max.read_text())
    except OSError:  # no cgroup v2 here, or not readable: the affinity alone
        limit = None
    return max(1, min(cores or 1, limit or cores or 1))
