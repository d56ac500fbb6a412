"""The Kafka-protocol listener: one asyncio task per connection, requests answered in order.

A frame that is oversized or does not decode closes that connection only; an API version that
is not served gets ApiVersions' UNSUPPORTED_VERSION answer or, for other APIs, a closed
connection, as Kafka brokers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable
from typing import Any, Literal

from shareproxy.core.errors import ErrorCode
from shareproxy.core.store import COORDINATOR_UNAVAILABLE, StoreUnavailable
from shareproxy.host.sockets import bind_socket
from shareproxy.kafka.acceptor import Acceptor
from shareproxy.kafka.answer_order import Answer, AnswersInOrder, Chunks, Slot
from shareproxy.kafka.connection_state import ConnectionState
from shareproxy.kafka.context import BrokerContext, Connection, Pending, Relayed
from shareproxy.kafka.dispatch import BEFORE_AUTHENTICATION, api_name, handler_for
from shareproxy.kafka.handlers import api_versions
from shareproxy.kafka.responses import KioEntity
from shareproxy.protocol.api_keys import ApiKey
from shareproxy.protocol.codec import (
    MalformedRequest,
    RawResponse,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response,
    encode_response_chunks,
    peek,
    response_type,
)
from shareproxy.protocol.error_response import error_entity
from shareproxy.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    MAX_UNAUTHENTICATED_FRAME_BYTES,
    PREFIX_BYTES,
    FrameError,
    frame_size,
)
from shareproxy.telemetry import metrics
from shareproxy.telemetry.logs import STORE_OUTAGE, RateLimit, first_line
from shareproxy.upstream.client import UpstreamError

_SEND_BUFFER = 4 * 1024 * 1024
_UNKNOWN_PEER = ("?", 0)  # a client gone before its address was read
# requests of one connection whose answers may be on their way at once: Produce and Fetch
# relayed upstream, in order over one upstream connection (others wait for every earlier
# answer, as a broker handles a connection's requests one after another)
PIPELINED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})
MAX_PIPELINED = 4  # each may be a whole upstream Fetch answer: bounded memory


class _Close(enum.Enum):
    """What ``_answer`` returns instead of an answer when the connection must end."""

    CLOSE = enum.auto()


CLOSE = _Close.CLOSE


log = logging.getLogger(__name__)
_connection_numbers = itertools.count(1)  # unique in the process: 0 names none
log.addFilter(RateLimit())  # what clients send decides how often these lines come


def _api_key(frame: bytes) -> int:
    try:
        return peek(frame)[0]
    except MalformedRequest:
        return -1  # answered (by closing) where the request is read


@functools.cache
def _meters(api_key: int) -> tuple[str, Any, Any]:
    """One API's name and its request metrics' children (answered "ok", duration): looked up
    once, not by label on every request. An "error" series appears at its first error."""
    api = api_name(api_key)
    return api, metrics.REQUESTS.labels(api, "ok"), metrics.REQUEST_SECONDS.labels(api)


class KafkaListener:
    def __init__(
        self,
        ctx: BrokerContext,
        host: str,
        port: int,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.protocol = protocol  # the listener's name and security protocol
        self.ssl_context = ssl_context
        self._acceptor: Acceptor | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._awaiting: set[asyncio.StreamWriter] = set()  # reading a request's size
        self._idle: set[asyncio.StreamWriter] = set()  # …and owing no answer
        self._closing = False

    def open_connections(self) -> dict[tuple[str, str], int]:
        """Open client connections by (listener, principal)."""
        counts: dict[tuple[str, str], int] = {}
        for conn in self._connections.values():
            key = (conn.listener, conn.state.principal)
            counts[key] = counts.get(key, 0) + 1
        return counts

    @property
    def accepting(self) -> bool:
        return self._acceptor is not None and self._acceptor.is_serving() and not self._closing

    async def start(self, sock: socket.socket | None = None) -> None:
        """Serve on ``sock`` if given (bound beforehand), else bind host and port now."""
        if sock is None:
            sock = bind_socket(self.host, self.port)
        self._acceptor = Acceptor(sock, self._serve, self.ssl_context)
        self._acceptor.start()
        bound = self._acceptor.address
        self.port = bound[1]
        log.info("Kafka listener %s on %s:%d", self.protocol, bound[0], bound[1])

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; answer the requests being handled; close every connection."""
        if self._acceptor is None:
            return
        self._acceptor.close()
        self._closing = True
        for writer in list(self._idle):  # waiting for a request: nothing to finish
            writer.close()
        if self._connections:
            _, pending = await asyncio.wait(set(self._connections), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._acceptor.wait_closed()
        self._acceptor = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = self._peer(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:  # a ~1 MiB ShareFetch response then leaves in one send
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER)
        state = ConnectionState.for_listener(self.protocol, writer.get_extra_info("peercert"))
        conn = Connection(
            str(peer[0]), int(peer[1]), self.protocol, state, next(_connection_numbers)
        )
        if state.authenticated:  # else counted once SaslAuthenticate names the principal
            metrics.CONNECTIONS.labels(conn.listener, state.principal).inc()
        self._connections[task] = conn
        # answers in the order of the requests. One ready while nothing is owed is written at
        # once; Produce/Fetch answers still on their way upstream (several may be, as to a
        # broker a client pipelines them) go through a queue and a writer task, made at the
        # first of them: a node holds one connection per member, and most never pipeline.
        answers: AnswersInOrder | None = None
        try:
            while not self._closing:
                self._awaiting.add(writer)
                if answers is None or not answers.owed:  # nothing owed to the client either
                    self._idle.add(writer)
                try:
                    prefix = await reader.readexactly(PREFIX_BYTES)
                except asyncio.IncompleteReadError:
                    return
                finally:
                    self._awaiting.discard(writer)
                    self._idle.discard(writer)
                limit = (
                    self.max_frame_bytes if state.authenticated else MAX_UNAUTHENTICATED_FRAME_BYTES
                )
                try:
                    size = frame_size(prefix, limit)
                except FrameError as e:
                    log.warning("closing %s: %s", peer, e)
                    return
                frame = await reader.readexactly(size)
                if answers is not None and _api_key(frame) not in PIPELINED:
                    await answers.join()  # as a broker: one after another
                response = await self._answer(conn, frame)
                if response is CLOSE:
                    break
                if isinstance(response, list) and (answers is None or not answers.owed):
                    if not await self._send(writer, response):
                        return
                elif response is not None:
                    if answers is None:
                        answers = AnswersInOrder(
                            writer,
                            MAX_PIPELINED,
                            functools.partial(self._all_written, writer),
                            functools.partial(self._peer, writer),
                        )
                    await answers.put(response)
                    if answers.broken:
                        return
                if state.closing:
                    break
            if answers is not None:
                await answers.join()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # only at shutdown, after the grace period: the connection just closes
        except Exception:
            log.exception("connection %s failed", peer)
        finally:
            self._connections.pop(task, None)
            writer.close()
            if answers is not None:  # before the link closes under what they wait for
                # its one round of waiting may meet the cancellation of a shutdown's grace
                # period running out: the connection closes all the same
                with contextlib.suppress(asyncio.CancelledError):
                    await answers.close()
            if conn.link is not None:
                await conn.link.close()
            if not self._closing:  # at shutdown another node takes over what was acquired
                await self._ended(conn)

    async def _ended(self, conn: Connection) -> None:
        """The connection closed: the share sessions it opened end, and their members' locks
        on this node with them, so a crashed consumer's records go to the others at once."""
        try:
            await self.ctx.consumers.connection_closed(conn.number)
        except StoreUnavailable as exc:
            STORE_OUTAGE.failed("ending a closed connection's share sessions", first_line(exc))
        except Exception as exc:
            log.debug("ending the share sessions of %s failed", conn.client_host, exc_info=exc)
            log.warning(
                "ending the share sessions of a closed connection from %s failed: %s",
                conn.client_host,
                first_line(exc),
            )

    async def _send(self, writer: asyncio.StreamWriter, chunks: Chunks) -> bool:
        """Write one answer; False, logged, when the connection broke (reset, timed out, TLS
        failure): nothing more is written to it."""
        try:
            writer.writelines(chunks)
            await writer.drain()
        except Exception as exc:  # not a cancellation: the connection ended
            log.info("connection to %s broke while answering: %r", self._peer(writer), exc)
            return False
        return True

    def _all_written(self, writer: asyncio.StreamWriter) -> None:
        """A connection's last answer owed was written: idle if it waits for a request, and
        closed at once if the listener is stopping."""
        if writer in self._awaiting:
            self._idle.add(writer)  # waiting for a request, owing nothing
            if self._closing:
                writer.close()  # shutting down: every answer owed has been written

    @staticmethod
    def _peer(writer: asyncio.StreamWriter) -> Any:
        """The client's address, or ``("?", 0)`` where the socket no longer tells it: uvloop
        raises once the client has reset it (ValueError or AttributeError, by when it is asked)."""
        with contextlib.suppress(Exception):  # whatever it raises: only a log line asks
            return writer.get_extra_info("peername") or _UNKNOWN_PEER
        return _UNKNOWN_PEER

    async def _answer(
        self, conn: Connection, frame: bytes
    ) -> Answer | Literal[_Close.CLOSE] | None:
        """Response chunks (or a task that makes them), None when the request takes no
        response, CLOSE to close."""
        try:
            api_key = peek(frame)[0]
        except MalformedRequest as e:
            log.warning("closing %s: %s", conn.client_host, e)
            return CLOSE
        if not conn.state.authenticated and api_key not in BEFORE_AUTHENTICATION:
            # not decoded at all: before authentication only the SASL exchange is read
            log.warning(
                "closing %s: %s before SASL authentication", conn.client_host, api_name(api_key)
            )
            return CLOSE
        try:
            request = decode_request(frame, self.ctx.served)
        except UnsupportedRequest as e:
            if e.api_key == ApiKey.API_VERSIONS:  # answer with v0 and the versions served
                body = api_versions.response(self.ctx.served, 0, ErrorCode.UNSUPPORTED_VERSION)
                return [encode_response(e.correlation_id, body)]
            log.warning("closing %s: %s", conn.client_host, e)
            return CLOSE
        except MalformedRequest as e:
            log.warning("closing %s: malformed request: %s", conn.client_host, e)
            return CLOSE
        started = time.perf_counter()
        try:
            body = await handler_for(request.api_key)(self.ctx, conn, request)
        except Exception as exc:
            body = self._failed(conn, request, exc)
        if type(body) is Relayed:
            return self._relayed(conn, request, started, body)
        if isinstance(body, Pending):
            return Slot.of(asyncio.create_task(self._finish(conn, request, started, body.answer)))
        return self._chunks(conn, request, started, body)

    def _relayed(
        self, conn: Connection, request: Request, started: float, relayed: Relayed
    ) -> Slot:
        """A slot the upstream's answer fills from its future's callback: no task, and the
        response is written in the round the answer arrives."""
        answer = relayed.answer
        slot = Slot(answer.cancel)

        def arrived(_: Any) -> None:
            if slot.ready:  # cancelled with its connection
                return
            try:
                outcome: RawResponse | UpstreamError = answer.outcome()
            except UpstreamError as exc:
                outcome = exc
            except asyncio.CancelledError:
                slot.fill(None)
                return
            try:
                body = relayed.finish(outcome)
            except Exception as exc:
                body = self._failed(conn, request, exc)
            try:
                if isinstance(body, Pending):  # more to ask first
                    slot.wait_for(
                        asyncio.create_task(self._finish(conn, request, started, body.answer))
                    )
                    return
                slot.fill(self._chunks(conn, request, started, body))
            except Exception:  # never left unfilled: the connection's later answers wait on it
                log.exception("answering %s failed", api_name(request.api_key))
                slot.fill(None)

        answer.future.add_done_callback(arrived)
        return slot

    async def _finish(
        self, conn: Connection, request: Request, started: float, answer: Awaitable[Any]
    ) -> Chunks | None:
        try:
            body = await answer
        except Exception as exc:
            body = self._failed(conn, request, exc)
        return self._chunks(conn, request, started, body)

    def _failed(
        self, conn: Connection, request: Request, exc: Exception | None = None
    ) -> KioEntity:
        """A defect: the client still gets an answer, others are unaffected. A state store out
        of reach is no defect: answered retriable, as Kafka does when its coordinator is away."""
        cls = response_type(request.api_key, request.api_version)
        if isinstance(exc, StoreUnavailable | OSError):
            what = f"{api_name(request.api_key)} v{request.api_version} from {conn.client_host}"
            if isinstance(exc, StoreUnavailable):
                STORE_OUTAGE.failed(f"{what}, answered retriable", first_line(exc))
            else:  # a connection of its own (the store's come as StoreUnavailable)
                log.warning("%s: a connection failed, answered retriable: %s", what, exc)
            return error_entity(
                cls,
                COORDINATOR_UNAVAILABLE,
                "the share-group state store (or a connection) cannot be reached: retry",
            )
        log.exception(
            "%s v%d from %s failed; answered UNKNOWN_SERVER_ERROR",
            api_name(request.api_key),
            request.api_version,
            conn.client_host,
        )
        return error_entity(
            cls,
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "the proxy failed to handle the request",
        )

    def _chunks(
        self, conn: Connection, request: Request, started: float, body: Any
    ) -> Chunks | None:
        api, ok, seconds = _meters(request.api_key)
        if body is None:
            ok.inc()
            return None
        try:
            chunks = encode_response_chunks(request.correlation_id, body)
        except Exception:
            body = self._failed(conn, request)
            chunks = encode_response_chunks(request.correlation_id, body)
        if getattr(body, "error_code", 0):
            metrics.REQUESTS.labels(api, "error").inc()
        else:
            ok.inc()
        seconds.observe(time.perf_counter() - started)
        return chunks
