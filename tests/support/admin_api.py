"""The admin API as its users reach it: an HTTP client, and the CLI's `groups` commands."""

from __future__ import annotations

import subprocess
import sys

import httpx


def api(proxy) -> httpx.Client:
    return httpx.Client(base_url=proxy.admin_url, timeout=30)


def cli(proxy, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shareproxy.cli", "groups", *args, "--admin-url", proxy.admin_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
