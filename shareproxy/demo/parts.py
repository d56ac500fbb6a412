"""The demo's helpers: the proxy on a thread of its own, librdkafka's log kept off the screen,
and offsets written as ranges."""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from shareproxy.settings.model import Settings


class ProxyThread:
    """The proxy on its own event loop, beside the (blocking) consumer threads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()  # asked to stop, perhaps before the loop runs
        self.thread = threading.Thread(target=self._run, name="shareproxy", daemon=True)

    def _run(self) -> None:
        from shareproxy.node.proxy import Proxy

        async def main() -> None:
            proxy = Proxy(self.settings)
            self._stop = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            try:
                await proxy.start()
                self.ready.set()
                if not self._stopping.is_set():
                    await self._stop.wait()
            finally:
                await proxy.stop()

        try:
            asyncio.run(main())
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    def start(self, stop: StopRequests) -> None:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.ready.wait(0.1) and time.monotonic() < deadline:
            stop.check()
        if self.error is not None:
            raise RuntimeError(f"the proxy failed to start: {self.error}") from self.error

    def stop(self) -> None:
        self._stopping.set()
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


class StopAsked(Exception):
    """Ctrl-C or SIGTERM arrived: the demo unwinds, stopping everything in order."""


class StopRequests:
    """``with StopRequests() as stop``: a stop signal only asks the demo to stop, and the demo
    looks (``check``) at each of its waits. Raised wherever the main thread happens to be, it
    could land inside librdkafka's configuration parsing (which reports it as a TypeError) or
    between starting a part and noting it started, which would then be left running. Once
    everything has stopped, the signal goes to whoever handled it before: the CLI's one line and
    exit code, or Python's KeyboardInterrupt."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.signum: int | None = None
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._saved[sig] = signal.signal(sig, self._note)
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.asked.set()

    def check(self) -> None:
        if self.asked.is_set():
            raise StopAsked

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        if self.signum is None or self.signum not in self._saved:
            return
        before = self._saved[self.signum]
        if callable(before):
            before(self.signum, None)
        elif before == signal.SIG_DFL:
            signal.raise_signal(self.signum)


class ClientLog:
    """librdkafka writes its log to the terminal from C, through any progress display; given a
    logger (``config``) it hands the lines to Python instead, and they are kept here."""

    _ids = itertools.count()

    def __init__(self) -> None:
        self.lines: list[str] = []
        logger = logging.getLogger(f"shareproxy.demo.single.clients.{next(self._ids)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.handlers[:] = [_Collect(self.lines)]
        self.config: dict[str, Any] = {"logger": logger}


class ProxyLog:
    """The proxy's own log and its upstream client's, kept off the screen while the demo runs
    (``with ProxyLog() as log``): a stopping broker would otherwise fill the terminal."""

    LOGGERS = ("shareproxy", "aiokafka")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._saved: list[tuple[logging.Logger, list[logging.Handler], bool]] = []

    def __enter__(self) -> ProxyLog:
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.handlers[:], logger.propagate))
            logger.handlers[:] = [_Collect(self.lines)]
            logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        for logger, handlers, propagate in self._saved:
            logger.handlers[:] = handlers
            logger.propagate = propagate
        self._saved.clear()


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def offset_ranges(offsets: Sequence[int], shown: int) -> str:
    """``0-17 40-52 90`` (sorted, distinct), at most ``shown`` ranges and how many more."""
    ranges: list[tuple[int, int]] = []
    for o in sorted(set(offsets)):
        if ranges and o == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], o)
        else:
            ranges.append((o, o))
    text = " ".join(f"{a}-{b}" if b > a else str(a) for a, b in ranges[:shown])
    if len(ranges) > shown:
        text += f" … +{len(ranges) - shown} more ranges"
    return text
