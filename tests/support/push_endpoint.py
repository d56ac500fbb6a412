"""A real HTTP endpoint for push tests: uvicorn on a local port, in a thread of the test process,
answering each POST as the test's ``answer`` says (a status, headers, a delay, or no answer at
all) and keeping every request it saw, with when it began and ended."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import uvicorn

from tests.support.consumers import wait_for


@dataclass(frozen=True)
class Pushed:
    """One request as the endpoint received it."""

    headers: dict[str, str]  # lower-cased names; the last value of a repeated one
    raw_headers: list[tuple[str, str]]
    body: bytes
    began: float
    ended: float
    status: int | None  # what it answered (None: it dropped the connection)

    @property
    def id(self) -> str:
        return self.headers["ce-id"]

    @property
    def delivery_count(self) -> int:
        return int(self.headers["ce-deliverycount"])

    def record_header(self, name: str) -> bytes:
        return unquote_to_bytes(self.headers[f"kafka-header-{name}"])


@dataclass(frozen=True)
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Decide = Callable[[dict[str, str], bytes], Answer]


class PushEndpoint:
    def __init__(
        self,
        answer: Decide = lambda headers, body: Answer(),
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        """``tls``: (certificate, key) PEM files: the endpoint answers https."""
        self.answer = answer
        self.seen: list[Pushed] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self.most_in_flight = 0
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self.port = sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/in"
        config = uvicorn.Config(
            self._app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            interface="asgi3",
            ssl_certfile=str(tls[0]) if tls else None,
            ssl_keyfile=str(tls[1]) if tls else None,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve([sock])), daemon=True
        )

    def start(self) -> PushEndpoint:
        self._thread.start()
        wait_for(lambda: self._server.started, 10, "the push endpoint to listen")
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()

    def accepted(self) -> set[str]:
        """The ids of the records answered with a 2xx."""
        with self._lock:
            return {p.id for p in self.seen if p.status is not None and 200 <= p.status < 300}

    def of(self, record_id: str) -> list[Pushed]:
        with self._lock:
            return [p for p in self.seen if p.id == record_id]

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        raw = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = {k.lower(): v for k, v in raw}
        began = time.monotonic()
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        answer = self.answer(headers, body)
        status: int | None = None
        try:
            if answer.delay_s:
                await asyncio.sleep(answer.delay_s)
            await send(
                {
                    "type": "http.response.start",
                    "status": answer.status,
                    "headers": [(k.encode(), v.encode()) for k, v in answer.headers.items()],
                }
            )
            empty = answer.status in (204, 304) or answer.status < 200
            await send({"type": "http.response.body", "body": b"" if empty else b"ok"})
            status = answer.status  # (a client that gave up first does not read it)
        finally:
            with self._lock:
                self._in_flight -= 1
                self.seen.append(Pushed(headers, raw, body, began, time.monotonic(), status))
