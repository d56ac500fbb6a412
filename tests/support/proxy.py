"""``shareproxy serve`` as a real subprocess, so tests can SIGKILL and restart it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from shareproxy.host.processes import spawn, stop_process, wait_for_port
from tests.support.ports import steady_ports


class ProxyProcess:
    def __init__(self, upstream: str, state_url: str, **options: object) -> None:
        self.upstream = upstream
        self.state_url = state_url
        self.options = options
        # restarted on the same ports after a kill: ports no outgoing connection may take meanwhile
        self.port = steady_ports(1)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.admin_port = steady_ports(1)
        self.admin_url = f"http://127.0.0.1:{self.admin_port}"
        self.log_path = Path(tempfile.mkdtemp(prefix="shareproxy-")) / "proxy.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(
        self, *, wait: bool = True, env: dict[str, str] | None = None, timeout: float = 60
    ) -> ProxyProcess:
        args = [
            sys.executable,
            "-m",
            "shareproxy.cli",
            "serve",
            "--bootstrap-servers",
            self.upstream,
            "--listen",
            f"127.0.0.1:{self.port}",
            "--state-url",
            self.state_url,
            "--admin-listen",
            f"127.0.0.1:{self.admin_port}",
        ]
        for name, value in self.options.items():
            flag = name.replace("_", "-")
            if isinstance(value, bool):  # a switch: --name / --no-name
                args.append(f"--{flag}" if value else f"--no-{flag}")
            else:
                args += [f"--{flag}", str(value)]
        with self.log_path.open("ab") as log:
            self.proc = spawn(args, log, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        if not wait:
            return self
        proc = self.proc
        try:
            for port in (self.port, self.admin_port):  # the admin API starts after the listener
                wait_for_port(
                    port, timeout, f"shareproxy (log: {self.log_path})", lambda: proc.poll() is None
                )
        except BaseException:  # a proxy that did not come up is not left running
            self.stop()
            raise
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all, as a crash."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        try:
            return stop_process(self.proc, grace_s=15)
        finally:
            self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
