"""Child processes and loopback ports: helpers that never outlive the process that started
them, ports handed out once, and waiting until something listens."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on, never one this process handed out before: the
    kernel may offer a just-closed port again, and a proxy given one port for both its Kafka
    listener and its admin API answers HTTP with a closed connection."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_for_port(
    port: int,
    timeout: float,
    what: str,
    alive: Callable[[], bool] = lambda: True,
    host: str = "127.0.0.1",
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {host}:{port} within {timeout}s")


_PR_SET_PDEATHSIG = 1


def signalled_when_parent_dies(sig: int) -> Callable[[], None]:
    """A ``preexec_fn``: in the child before exec, Linux is asked to send ``sig`` when the
    parent dies, so a parent killed mid-run leaves no orphan behind."""

    def arm() -> None:
        if sys.platform == "linux":
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)

    return arm


# helpers (a test timeout, a Ctrl-C'd demo): killed outright
_die_with_parent = signalled_when_parent_dies(signal.SIGKILL)


def spawn(
    args: Sequence[str], log: IO[bytes], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A helper subprocess that does not outlive its parent, output to ``log``. Start it from
    the main thread: Linux ties the death signal to the thread that forked."""
    return subprocess.Popen(
        list(args),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=_die_with_parent,
        start_new_session=True,  # a terminal's Ctrl-C reaches the parent, which stops it in order
    )


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10) -> int:
    """SIGTERM, then SIGKILL after ``grace_s``; the exit code."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(5)
