"""The composition root: state store, upstream, share-partition leaders, coordinator and the
Kafka listener, started in order and stopped in reverse."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Coroutine
from typing import Any

from sqlalchemy import text

from shareproxy.admin.app import AdminServer, create_app
from shareproxy.admin.console import PREFIX as CONSOLE_PATH
from shareproxy.admin.health import ReadinessProbes
from shareproxy.core.failures import Failure
from shareproxy.host.sockets import bind_socket
from shareproxy.kafka.context import BrokerContext
from shareproxy.kafka.dispatch import SERVED, advertised
from shareproxy.kafka.listener import KafkaListener
from shareproxy.node import holdings
from shareproxy.node.startup import (
    connect_upstream,
    listen_errors,
    listener_tls,
    upstream_settings,
)
from shareproxy.node.wiring import build_runtime, clock_ms, group_defaults
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import create_engine, shown_url, store_errors
from shareproxy.persistence.nodes import NodeRecords
from shareproxy.persistence.repository import SqlShareStateStore
from shareproxy.push.pushers import Pushers
from shareproxy.runtime.cluster import ClusterNodes
from shareproxy.runtime.jobs import Periodic, every
from shareproxy.security import listeners
from shareproxy.security.guard import Security
from shareproxy.security.listeners import EVERY_ADDRESS, host_name, split_host_port
from shareproxy.security.store import SecurityStore
from shareproxy.settings.model import Settings
from shareproxy.telemetry import metrics
from shareproxy.telemetry.logs import quiet_store_pool
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.coordinators import Coordinators, cluster_versions

log = logging.getLogger("shareproxy")


class ProxyFailed(Failure):
    """The proxy stopped because it could not go on (its node id taken over, its lease lost for
    good); the message says why."""


class Proxy:
    """Settings are validated when loaded (``settings``); what is left to check here, the
    contents of the certificate files, is checked before anything starts."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.named: list[str] = []  # protocols of listeners advertised under the host's name
        self.plan = listeners.plan(
            settings.listeners,
            settings.listen,
            settings.advertised_listeners,
            settings.advertised_listener,
            lambda spec: self.named.append(spec.protocol),
        )
        _, self.advertised = self.plan[0]
        if settings.authorization == "auto":
            self.authorization = any(spec.protocol != "PLAINTEXT" for spec, _ in self.plan)
        else:
            self.authorization = settings.authorization == "on"
        self.mechanisms = tuple(
            m.strip().upper() for m in settings.sasl_enabled_mechanisms.split(",") if m.strip()
        )
        self.defaults = group_defaults(settings)
        self.tls = listener_tls(settings)
        self.upstream_settings = upstream_settings(settings)
        self.listener: KafkaListener | None = None  # the first; all of them in self.listeners
        self.listeners: list[KafkaListener] = []
        self.admin: AdminServer | None = None
        self._running = contextlib.AsyncExitStack()  # what started, stopped in reverse
        self.must_stop = asyncio.Event()  # set when the proxy cannot go on serving
        self.fatal: str | None = None  # why

    def admin_url(self) -> str:
        """Where the admin API and /metrics answer, as the start-up line names it."""
        host, port = split_host_port(self.settings.admin_listen)
        if self.admin is not None:
            port = self.admin.port
        return f"http://{host or '0.0.0.0'}:{port}"

    def console_url(self) -> str:
        """The web console's page, served by the admin listener."""
        return f"{self.admin_url()}{CONSOLE_PATH}/"

    def _admin_advertised(self, admin_socket: socket.socket) -> str:
        """Where the other nodes reach this node's admin API: --admin-advertised-url, or the
        admin listener's address (this host's name for one on every address, as a Kafka
        listener's advertised host), with the port it is bound to."""
        if self.settings.admin_advertised_url:
            return self.settings.admin_advertised_url
        host, _ = split_host_port(self.settings.admin_listen)
        if host in EVERY_ADDRESS:
            host = host_name()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{admin_socket.getsockname()[1]}"

    def listener_address(self, protocol: str) -> str:
        host, port = self.ctx.advertised[protocol]
        return f"{host}:{port}"

    async def start(self, auto_migrate: bool = True) -> None:
        """Start everything in phases: the store, what is bound and reached before anything
        runs, the runtime's background jobs, this node among the live ones, then the
        listeners. ``stop`` undoes whatever part of it ran, in reverse."""
        await self._open_store(auto_migrate)
        *kafka_sockets, (admin_socket, admin_what) = self._bind()  # in use: known at once
        served = await self._reach_upstream()
        self._running.push_async_callback(self.runtime.stop)  # stops what of it started
        await self.runtime.start()
        told = self._told(kafka_sockets)
        # joined once its ports are bound, and before any client is served: until then this
        # node would place everything on itself, and a share-partition it loaded would fence
        # the node that leads it
        await self.runtime.nodes.join(told, self._admin_advertised(admin_socket))
        self._running.push_async_callback(self.runtime.nodes.leave)
        await self._serve_kafka(told, served, kafka_sockets)
        self._push()
        await self._serve_admin(admin_socket, admin_what)

    def _push(self) -> None:
        """Run the groups' pushes: each node those of the share-partitions it leads."""
        pushes = self.runtime.group_admin.pushes
        self.pushers.start()
        self._running.push_async_callback(self.pushers.stop)
        pushes.on_change(self.pushers.changed)
        self.pushers.changed(pushes.specs)

    async def _open_store(self, auto_migrate: bool) -> None:
        """Migrate (or check) the store's schema, construct the runtime over it, and load what
        the store holds for it: group configs, users and ACLs."""
        s = self.settings
        with store_errors(shown_url(s.state_url)):
            if auto_migrate:
                if not await migrate.schema_is_current(s.state_url):
                    await _to_the_end(asyncio.to_thread(migrate.upgrade, s.state_url))
            else:
                await migrate.require_current(s.state_url)
            self.engine = create_engine(s.state_url)
            self._running.push_async_callback(self.engine.dispose)
            self.store = SqlShareStateStore(self.engine, s.state_fold_every, keep_connection=True)
            self._running.push_async_callback(self.store.close)  # before the engine's disposal
            self.upstream = Upstream(self.upstream_settings)
            self._running.push_async_callback(self.upstream.close)
            nodes = ClusterNodes(
                NodeRecords(self.engine),
                s.node_id if isinstance(s.node_id, int) else None,  # None: AUTO, leased
                s.node_lease_ms,
                self._cannot_go_on,
                replace=s.replace_node,
            )
            self.runtime = build_runtime(
                s, self.store, self.upstream, nodes, defaults=self.defaults
            )
            await self.runtime.configs.load()
            rt = self.runtime
            self.pushers = Pushers(
                rt.consumers, rt.archived, s.push_targets(), clock_ms, ca_bundle=s.push_ca_bundle
            )
            self.security = Security(
                SecurityStore(self.engine),
                enabled=self.authorization,
                super_users=frozenset(u.strip() for u in s.super_users.split(";") if u.strip()),
            )
            await self.security.load()
        security = self.security
        reloads = Periodic(
            "security-refresh",
            every(lambda: security.refresh_s),
            security.load,
            "reloading users and ACLs",
            at_once=False,
        )
        reloads.start()
        self._running.push_async_callback(reloads.stop)

    async def _reach_upstream(self) -> dict[int, tuple[int, int]]:
        """Connect to the upstream cluster; the API versions to advertise."""
        await connect_upstream(self.upstream, self.settings)
        await self.upstream.refresh_metadata()
        try:
            self.upstream_versions = await cluster_versions(self.upstream)
        except UpstreamError as exc:  # brokers that do not say: assume what the proxy speaks
            log.warning("upstream API versions unknown (%s): advertising the proxy's own", exc)
            self.upstream_versions = dict(SERVED)
        return advertised(self.upstream_versions)

    def _told(self, kafka_sockets: list[tuple[socket.socket, str]]) -> dict[str, tuple[str, int]]:
        """The address clients are told for each listener: the port bound for an ephemeral
        one, and a line saying so where the host's name stands in for an advertised one."""
        told = {spec.protocol: address for spec, address in self.plan}
        for (spec, address), (sock, what) in zip(self.plan, kafka_sockets, strict=True):
            if address[1] == 0:  # an ephemeral port: tell clients the one bound
                told[spec.protocol] = (address[0], sock.getsockname()[1])
            if spec.protocol in self.named:
                host, port = told[spec.protocol]
                log.info(
                    "advertising %s:%d for %s: no advertised listener given, so clients are "
                    "told this host's name",
                    host,
                    port,
                    what,
                )
        return told

    async def _serve_kafka(
        self,
        told: dict[str, tuple[str, int]],
        served: dict[int, tuple[int, int]],
        kafka_sockets: list[tuple[socket.socket, str]],
    ) -> None:
        s, rt = self.settings, self.runtime
        self.ctx = BrokerContext(
            node_id=rt.nodes.node_id,
            advertised=told,
            cluster=rt.nodes,
            security=self.security,
            sasl_mechanisms=self.mechanisms,
            upstream=self.upstream,
            consumers=rt.consumers,
            coordinator=rt.coordinator,
            settings_for=rt.settings_for,
            clock_ms=clock_ms,
            admin=rt.group_admin,
            served=served,
            coordinators=Coordinators(self.upstream, self.upstream_versions),
            librdkafka_fetch_wait_ms=s.librdkafka_fetch_wait_ms,
        )
        for (spec, _), (sock, what) in zip(self.plan, kafka_sockets, strict=True):
            listener = KafkaListener(
                self.ctx,
                spec.host,
                spec.port,
                s.max_frame_bytes,
                protocol=spec.protocol,
                ssl_context=self.tls if spec.uses_tls else None,
            )
            with listen_errors(what):
                await listener.start(sock)
            self.listeners.append(listener)
            self._running.push_async_callback(listener.stop)
        self.listener = self.listeners[0]

    async def _serve_admin(self, admin_socket: socket.socket, admin_what: str) -> None:
        rt = self.runtime
        probes = ReadinessProbes(
            store=self._probe_store,
            upstream=self._probe_upstream,
            listener=lambda: bool(self.listeners) and all(x.accepting for x in self.listeners),
            owned=lambda: holdings.owned(rt.nodes, rt.partitions, rt.coordinator),
        )
        metrics.install_live_state(
            lambda: holdings.live_state(
                rt.nodes,
                rt.partitions,
                rt.coordinator,
                rt.census,
                rt.sessions,
                self.listeners,
                rt.upstream,
            )
        )
        self.admin = AdminServer(
            create_app(
                probes,
                rt.group_admin,
                self.security,
                rt.consumers,
                rt.archived,
                rt.directory,
                push_targets=self.pushers.targets,
                push_status=self._push_status,
            ),
            admin_socket,
        )
        with listen_errors(admin_what):
            await self.admin.start()
        self._running.push_async_callback(self.admin.stop)

    def _push_status(self, group_id: str) -> dict[str, Any] | None:
        status = self.pushers.status(group_id)
        return None if status is None else status.shown()

    def _cannot_go_on(self, reason: str) -> None:
        log.error(reason)
        self.fatal = reason
        self.must_stop.set()

    def _bind(self) -> list[tuple[socket.socket, str]]:
        """The Kafka listeners' sockets (in plan order), then the admin API's, each with the
        setting that named it: bound now, so a port in use is reported before any wait, but
        listening only once everything behind them runs (until then clients are refused)."""
        s = self.settings
        flag = "--listeners" if s.listeners else "--listen"
        wanted = [
            (spec.host, spec.port, f"{flag} {spec.protocol}://{spec.host}:{spec.port}")
            if s.listeners
            else (spec.host, spec.port, f"{flag} {s.listen}")
            for spec, _ in self.plan
        ]
        host, port = split_host_port(s.admin_listen)
        wanted.append((host, port, f"--admin-listen {s.admin_listen}"))
        sockets = []
        for host, port, what in wanted:
            with listen_errors(what):
                sock = bind_socket(host, port)
            self._running.callback(sock.close)
            sockets.append((sock, what))
        return sockets

    async def _probe_store(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("select 1"))

    async def _probe_upstream(self) -> None:
        await self.upstream.refresh_metadata([])

    async def stop(self) -> None:
        """Stop what started, in reverse order (also after a start that failed midway)."""
        await self._running.aclose()


async def serve(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT, which stop the proxy gracefully, also while it starts."""
    proxy = Proxy(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.create_task(proxy.start(auto_migrate=settings.auto_migrate))
    stopping = asyncio.create_task(_first(stop.wait(), proxy.must_stop.wait()))
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stopping before the start completed")
            quiet_store_pool()  # the start's store work is cut off wherever it stands
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        else:
            starting.result()  # the reason it could not start, if so
            log.info(
                "shareproxy serving %s, admin API and metrics on %s, console at %s, "
                "upstream %s, state store %s",
                ", ".join(
                    f"{x.protocol} on {x.host}:{x.port} "
                    f"(advertised {proxy.listener_address(x.protocol)})"
                    for x in proxy.listeners
                ),
                proxy.admin_url(),
                proxy.console_url(),
                settings.bootstrap_servers,
                shown_url(settings.state_url),
            )
            await stopping
            log.info("stopping: no new connections; answering requests in flight")
        began = time.monotonic()
        await proxy.stop()
        log.info("stopped", extra={"seconds": round(time.monotonic() - began, 3)})
    finally:
        stopping.cancel()
        await proxy.stop()  # nothing left to stop after a clean stop
    if proxy.fatal is not None:
        raise ProxyFailed(proxy.fatal)


async def _to_the_end(work: Coroutine[Any, Any, None]) -> None:
    """Await ``work``, which runs in a thread: a stop while it runs waits for it to end (a
    thread cannot be cancelled), so nothing it does comes after the proxy said it stopped."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # stopping anyway: the next start migrates, or says why not
        raise


async def _first(*waits: Coroutine[Any, Any, object]) -> None:
    """Return when the first of the waits does; the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
