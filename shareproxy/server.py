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

from shareproxy import exits, metrics, node_state
from shareproxy.admin.app import AdminServer, create_app
from shareproxy.admin.health import ReadinessProbes
from shareproxy.broker.census import StoredCensus
from shareproxy.broker.consumers import ShareConsumers
from shareproxy.broker.consumption import Consumption
from shareproxy.broker.coordinator import Coordinator
from shareproxy.broker.dead_letters import DeadLetterWriter
from shareproxy.broker.group_admin import GroupAdmin
from shareproxy.broker.group_commit import GroupCommitter
from shareproxy.broker.group_configs import READ_EVERY_S as CONFIGS_READ_EVERY_S
from shareproxy.broker.group_configs import GroupConfigs
from shareproxy.broker.nodes import ClusterNodes
from shareproxy.broker.partitions import SharePartitions
from shareproxy.broker.retention import GroupRetention
from shareproxy.broker.upstream_feed import UpstreamFeed
from shareproxy.config import AUTO, Settings
from shareproxy.core.group_settings import GroupSettings
from shareproxy.core.share_session import ShareSessionCache
from shareproxy.jobs import Periodic
from shareproxy.kafka.context import BrokerContext
from shareproxy.kafka.dispatch import SERVED, advertised
from shareproxy.kafka.listener import KafkaListener
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import create_engine, shown_url, store_errors
from shareproxy.persistence.nodes import NodeRecords
from shareproxy.persistence.repository import SqlShareStateStore
from shareproxy.protocol.codec import warm
from shareproxy.security import listeners
from shareproxy.security.guard import Security
from shareproxy.security.listeners import split_host_port
from shareproxy.security.store import SecurityStore
from shareproxy.startup import (
    bind_socket,
    connect_upstream,
    listen_errors,
    listener_tls,
    upstream_settings,
)
from shareproxy.upstream.client import Upstream, UpstreamError
from shareproxy.upstream.coordinators import Coordinators, cluster_versions

log = logging.getLogger("shareproxy")


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Proxy:
    """Settings are validated when loaded (``config``); what is left to check here, the
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
        self.defaults = GroupSettings(max_size=settings.group_max_size).with_configs(
            settings.group_configs()
        )
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

    def listener_address(self, protocol: str) -> str:
        host, port = self.ctx.advertised[protocol]
        return f"{host}:{port}"

    def settings_for(self, group_id: str) -> GroupSettings:
        return self.configs.settings_for(group_id)

    async def start(self, auto_migrate: bool = True) -> None:
        """Start everything in order; ``stop`` undoes whatever part of it ran."""
        s = self.settings
        with store_errors(shown_url(s.state_url)):
            if auto_migrate:
                if not await migrate.schema_is_current(s.state_url):
                    await asyncio.to_thread(migrate.upgrade, s.state_url)
            else:
                await migrate.require_current(s.state_url)
            self.engine = create_engine(s.state_url)
            self._running.push_async_callback(self.engine.dispose)
            self.store = SqlShareStateStore(self.engine, s.state_fold_every)
            self.configs = GroupConfigs(self.store, self.defaults, s.group_bounds())
            await self.configs.load()
            self.security = Security(
                SecurityStore(self.engine),
                enabled=self.authorization,
                super_users=frozenset(u.strip() for u in s.super_users.split(";") if u.strip()),
            )
            await self.security.load()
        self.security.start()
        self._running.push_async_callback(self.security.stop)
        *kafka_sockets, (admin_socket, admin_what) = self._bind()  # in use: known at once
        self.upstream = Upstream(self.upstream_settings)
        self._running.push_async_callback(self.upstream.close)
        await connect_upstream(self.upstream, s)
        await self.upstream.refresh_metadata()
        try:
            upstream_versions = await cluster_versions(self.upstream)
        except UpstreamError as exc:  # brokers that do not say: assume what the proxy speaks
            log.warning("upstream API versions unknown (%s): advertising the proxy's own", exc)
            upstream_versions = dict(SERVED)
        served = advertised(upstream_versions)
        self.committer = GroupCommitter(self.store)
        self.committer.start()
        self._running.push_async_callback(self.committer.stop)
        self.sessions = ShareSessionCache(s.max_share_sessions, s.max_share_sessions_per_client)
        self.nodes = ClusterNodes(
            NodeRecords(self.engine),
            None if s.node_id == AUTO else s.node_id,
            s.node_lease_ms,
            self._cannot_go_on,
            replace=s.replace_node,
        )
        self.partitions = SharePartitions(
            self.store,
            self.committer,
            self.upstream,
            self.settings_for,
            clock_ms,
            leads=self.nodes.leads,
            refresh_settings=self.configs.refresh,
        )
        self.partitions.start()
        self._running.push_async_callback(self.partitions.stop)
        self.configs.on_change(self.partitions.apply_settings)
        self.dead_letters = DeadLetterWriter(
            self.partitions, self.upstream, self.settings_for, clock_ms
        )
        self.dead_letters.start()
        self._running.push_async_callback(self.dead_letters.stop)  # before the partitions stop
        self.feed = UpstreamFeed(self.upstream, clock_ms)
        self.feed.start()
        self._running.push_async_callback(self.feed.stop)  # before the partitions stop
        self.consumption = Consumption(
            self.partitions, self.feed, self.store, self.settings_for, clock_ms
        )
        self.coordinator = Coordinator(
            self.store,
            self.upstream,
            self.partitions,
            self.sessions,
            self.settings_for,
            clock_ms,
            forget_group=self.configs.forget,
            max_groups=s.group_share_max_groups,
            coordinates=self.nodes.coordinates,
        )
        self.partitions.members_assigned = lambda key: self.coordinator.members_assigned(
            key.group_id, key.topic_id, key.partition
        )
        self.consumers = ShareConsumers(
            self.consumption, self.sessions, self.coordinator, self.nodes, clock_ms
        )
        self.nodes.on_change(lambda placement: self._placement_changed())
        self.nodes.on_lease_lost(self._lease_lost)
        self.coordinator.start()
        self._running.push_async_callback(self.coordinator.stop)
        self.retention = GroupRetention(
            self.store,
            self.coordinator,
            self.partitions,
            self.upstream,
            s.share_group_retention_ms,
            clock_ms,
            s.share_group_retention_check_interval_ms,
        )
        self.retention.start()
        self._running.push_async_callback(self.retention.stop)
        self.group_admin = GroupAdmin(
            self.store,
            self.coordinator,
            self.partitions,
            self.upstream,
            self.configs,
            self.dead_letters,
            coordinator_of=lambda g: self.nodes.describe(self.nodes.serving().group_coordinator(g)),
        )
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
        # joined once its ports are bound, and before any client is served: until then this
        # node would place everything on itself, and a share-partition it loaded would fence
        # the node that leads it
        await self.nodes.join(told)
        self._running.push_async_callback(self.nodes.leave)
        ctx = BrokerContext(
            node_id=self.nodes.node_id,
            advertised=told,
            cluster=self.nodes,
            security=self.security,
            sasl_mechanisms=self.mechanisms,
            upstream=self.upstream,
            consumers=self.consumers,
            coordinator=self.coordinator,
            settings_for=self.settings_for,
            clock_ms=clock_ms,
            admin=self.group_admin,
            served=served,
            coordinators=Coordinators(self.upstream, upstream_versions),
            librdkafka_fetch_wait_ms=s.librdkafka_fetch_wait_ms,
        )
        self.ctx = ctx
        warm(served)
        for (spec, _), (sock, what) in zip(self.plan, kafka_sockets, strict=True):
            listener = KafkaListener(
                ctx,
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
        probes = ReadinessProbes(
            store=self._probe_store,
            upstream=self._probe_upstream,
            listener=lambda: bool(self.listeners) and all(x.accepting for x in self.listeners),
            owned=lambda: node_state.owned(self.nodes, self.partitions, self.coordinator),
        )
        self.census = StoredCensus(self.store)
        self.census.start()
        self._running.push_async_callback(self.census.stop)
        # a group config changed through another node applies here within a second
        self.config_reader = Periodic(
            "group-configs", CONFIGS_READ_EVERY_S, self.configs.refresh, "reading group configs"
        )
        self.config_reader.start()
        self._running.push_async_callback(self.config_reader.stop)
        metrics.install_live_state(
            lambda: node_state.live_state(
                self.nodes,
                self.partitions,
                self.coordinator,
                self.census,
                self.sessions,
                self.listeners,
            )
        )
        self.admin = AdminServer(
            create_app(probes, self.group_admin, self.security, self.consumers),
            admin_socket,
        )
        with listen_errors(admin_what):
            await self.admin.start()
        self._running.push_async_callback(self.admin.stop)

    def _placement_changed(self) -> None:
        """The live nodes changed: let go of what other nodes own now."""
        self.partitions.let_go()
        self.coordinator.let_go()

    def _lease_lost(self) -> None:
        """Other nodes may have claimed anything this one held while its lease had lapsed."""
        self.partitions.let_go(everything=True)
        self.coordinator.let_go(everything=True)

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
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        else:
            starting.result()  # the reason it could not start, if so
            log.info(
                "shareproxy serving %s, admin API and metrics on %s, upstream %s, state store %s",
                ", ".join(
                    f"{x.protocol} on {x.host}:{x.port} "
                    f"(advertised {proxy.listener_address(x.protocol)})"
                    for x in proxy.listeners
                ),
                proxy.admin_url(),
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
        raise exits.CommandError(proxy.fatal)


async def _first(*waits: Coroutine[Any, Any, object]) -> None:
    """Return when the first of the waits does; the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
