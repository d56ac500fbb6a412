"""Accepting the Kafka listener's connections: every connection waiting is taken each time the
listening socket is readable, not one per turn of the event loop.

uvloop's server (libuv) accepts one connection per loop iteration. When a thousand clients start
together each iteration carries hundreds of their requests (~0.1 s on one core), so the proxy
took ~10 connections a second while they asked for hundreds: the kernel's queue stayed full,
their SYNs were dropped, the clients retried FindCoordinator every second over the connections
they had, and none of them got further. Taking the whole queue at each wake ends that: a
connection waits one iteration at most.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from shareproxy.host.sockets import LISTEN_BACKLOG
from shareproxy.upstream.frames import FrameReader

# Out of file descriptors (or kernel memory): a retry at the next wake would only spin, so
# accepting pauses this long while the connections the proxy has go on being served.
PAUSE_S = 1.0

Served = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]

log = logging.getLogger(__name__)


class Acceptor:
    """Serves each accepted connection with ``serve(reader, writer)`` in a task of its own, as
    ``asyncio.start_server`` does (TLS: once the handshake is done)."""

    def __init__(
        self, sock: socket.socket, serve: Served, ssl_context: ssl.SSLContext | None
    ) -> None:
        self._sock = sock
        self._serve = serve
        self._ssl = ssl_context
        self._loop = asyncio.get_running_loop()
        self._connecting: set[asyncio.Task[None]] = set()
        self._paused: asyncio.TimerHandle | None = None
        self._serving = False

    @property
    def address(self) -> Any:
        return self._sock.getsockname()

    def start(self) -> None:
        self._sock.setblocking(False)
        self._sock.listen(LISTEN_BACKLOG)
        self._loop.add_reader(self._sock.fileno(), self._accept_waiting)
        self._serving = True

    def is_serving(self) -> bool:
        return self._serving

    def close(self) -> None:
        """No new connection; those still connecting (a TLS handshake) are dropped. Served ones
        are the caller's."""
        if not self._serving:
            return
        self._serving = False
        if self._paused is not None:
            self._paused.cancel()
        else:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        for task in self._connecting:
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._connecting, return_exceptions=True)

    def _accept_waiting(self) -> None:
        for _ in range(LISTEN_BACKLOG):  # the queue's bound: never an endless turn
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # reset by its client while queued
            except OSError as exc:  # out of file descriptors, or of kernel memory
                log.warning(
                    "cannot accept connections for %.0f s: %s (is the open files limit too low?)",
                    PAUSE_S,
                    exc,
                )
                self._loop.remove_reader(self._sock.fileno())
                self._paused = self._loop.call_later(PAUSE_S, self._resume)
                return
            conn.setblocking(False)
            task = self._loop.create_task(self._connect(conn))
            self._connecting.add(task)
            task.add_done_callback(self._connecting.discard)

    def _resume(self) -> None:
        self._paused = None
        if self._serving:
            self._loop.add_reader(self._sock.fileno(), self._accept_waiting)

    async def _connect(self, conn: socket.socket) -> None:
        # a client's request is read with one copy at most: a plain StreamReader copies every
        # chunk into its buffer, copies the frame out of it, and pauses and resumes the socket
        # on each chunk of a frame past 128 KiB (a Produce of a megabyte of records)
        reader = FrameReader()
        protocol = asyncio.StreamReaderProtocol(reader, self._serve)
        try:
            await self._loop.connect_accepted_socket(lambda: protocol, conn, ssl=self._ssl)
        except (OSError, ssl.SSLError) as exc:  # a TLS handshake failed, or the peer left
            log.debug("connection not established: %r", exc)  # its transport closed it
