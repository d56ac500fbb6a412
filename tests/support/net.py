"""Loopback ports and readiness waits for the test subprocesses."""

from shareproxy.embedded import free_port, wait_for_port

__all__ = ["free_port", "wait_for_port"]
