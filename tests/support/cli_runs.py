"""The CLI run as a user runs it: a subprocess in an environment without SHAREPROXY_* settings,
so only what a test gives it counts."""

from __future__ import annotations

import os
import subprocess
import sys

CLI = [sys.executable, "-m", "shareproxy.cli"]


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHAREPROXY_")}
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
        input=stdin,
    )
