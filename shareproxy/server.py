"""The composition root: state store, upstream, share-partition leaders, coordinator and the
Kafka listener, started in order and stopped in reverse."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

from sqlalchemy import text

from shareproxy import metrics
from shareproxy.admin.app import AdminServer, create_app
from shareproxy.admin.health import ReadinessProbes
from shareproxy.broker.context import BrokerContext
from shareproxy.broker.coordinator import Coordinator
from shareproxy.broker.dispatch import SERVED
from shareproxy.broker.group_admin import GroupAdmin
from shareproxy.broker.group_commit import GroupCommitter
from shareproxy.broker.group_configs import GroupConfigs
from shareproxy.broker.group_settings import GroupSettings
from shareproxy.broker.listener import KafkaListener
from shareproxy.broker.partitions import SharePartitions
from shareproxy.broker.upstream import Upstream, UpstreamError, UpstreamSettings
from shareproxy.config import Settings, split_host_port
from shareproxy.core.lag import partition_lag
from shareproxy.core.offset_reset import parse_auto_offset_reset
from shareproxy.core.share_group import GroupState
from shareproxy.core.share_session import ShareSessionCache
from shareproxy.persistence import migrate
from shareproxy.persistence.engine import async_url, create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from shareproxy.persistence.security_store import SecurityStore
from shareproxy.protocol.codec import warm
from shareproxy.security import listeners, scram
from shareproxy.security.guard import Security

log = logging.getLogger("shareproxy")


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


class SchemaBehind(RuntimeError):
    pass


class Proxy:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.plan = listeners.plan(
            settings.listeners,
            settings.listen,
            settings.advertised_listeners,
            settings.advertised_listener,
        )
        first, self.advertised = self.plan[0]
        self.listen_host, self.listen_port = first.host, first.port
        if settings.authorization == "auto":
            self.authorization = any(spec.protocol != "PLAINTEXT" for spec, _ in self.plan)
        else:
            self.authorization = settings.authorization == "on"
        self.mechanisms = tuple(
            m.strip().upper() for m in settings.sasl_enabled_mechanisms.split(",") if m.strip()
        )
        wrong = [m for m in self.mechanisms if m not in ("PLAIN", *scram.MECHANISMS)]
        if wrong:
            raise ValueError(f"unknown SASL mechanisms {wrong}")
        if any(spec.uses_tls for spec, _ in self.plan) and not settings.ssl_certfile:
            raise ValueError("an SSL or SASL_SSL listener needs --ssl-certfile (and its key)")
        self.defaults = GroupSettings(
            record_lock_duration_ms=settings.record_lock_duration_ms,
            delivery_count_limit=settings.delivery_count_limit,
            max_record_locks=settings.partition_max_record_locks,
            auto_offset_reset=parse_auto_offset_reset(settings.auto_offset_reset),
            isolation_level=1 if settings.isolation_level == "read_committed" else 0,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            max_size=settings.group_max_size,
        )
        self.listener: KafkaListener | None = None  # the first; all of them in self.listeners
        self.listeners: list[KafkaListener] = []
        self.admin: AdminServer | None = None

    def listener_address(self, protocol: str) -> str:
        host, port = self.ctx.advertised[protocol]
        return f"{host}:{port}"

    def settings_for(self, group_id: str) -> GroupSettings:
        return self.configs.settings_for(group_id)

    async def start(self, auto_migrate: bool = True) -> None:
        s = self.settings
        if not await migrate.schema_is_current(s.state_url):
            if not auto_migrate:
                raise SchemaBehind(
                    "the state store schema is behind: run `shareproxy migrate` first"
                )
            await asyncio.to_thread(migrate.upgrade, s.state_url)
        self.engine = create_engine(s.state_url)
        self.store = SqlShareStateStore(self.engine, s.state_fold_every)
        self.configs = GroupConfigs(self.store, self.defaults)
        await self.configs.load()
        self.security = Security(
            SecurityStore(self.engine),
            enabled=self.authorization,
            super_users=frozenset(u.strip() for u in s.super_users.split(";") if u.strip()),
        )
        await self.security.load()
        self.security.start()
        self.upstream = Upstream(_upstream_settings(s))
        await self._connect_upstream()
        await self.upstream.refresh_metadata()
        self.committer = GroupCommitter(self.store)
        self.committer.start()
        self.sessions = ShareSessionCache(s.max_share_sessions)
        self.partitions = SharePartitions(
            self.store, self.committer, self.upstream, self.settings_for, clock_ms
        )
        self.partitions.start()
        self.configs.on_change(self.partitions.apply_settings)
        self.coordinator = Coordinator(
            self.store,
            self.upstream,
            self.partitions,
            self.sessions,
            self.settings_for,
            clock_ms,
            forget_group=self.configs.forget,
        )
        self.coordinator.start()
        self.group_admin = GroupAdmin(
            self.store, self.coordinator, self.partitions, self.upstream, self.configs
        )
        ctx = BrokerContext(
            node_id=s.node_id,
            advertised={spec.protocol: address for spec, address in self.plan},
            security=self.security,
            sasl_mechanisms=self.mechanisms,
            upstream=self.upstream,
            partitions=self.partitions,
            coordinator=self.coordinator,
            sessions=self.sessions,
            settings_for=self.settings_for,
            clock_ms=clock_ms,
            admin=self.group_admin,
        )
        self.ctx = ctx
        warm(SERVED)
        tls = None
        if s.ssl_certfile:
            tls = listeners.server_ssl_context(
                s.ssl_certfile, s.ssl_keyfile, s.ssl_cafile, s.ssl_client_auth
            )
        for spec, address in self.plan:
            listener = KafkaListener(
                ctx,
                spec.host,
                spec.port,
                s.max_frame_bytes,
                protocol=spec.protocol,
                ssl_context=tls if spec.uses_tls else None,
            )
            await listener.start()
            self.listeners.append(listener)
            if address[1] == 0:  # an ephemeral port: tell clients the one bound
                ctx.advertised[spec.protocol] = (address[0], listener.port)
        self.listener = self.listeners[0]
        admin_host, admin_port = split_host_port(s.admin_listen)
        probes = ReadinessProbes(
            store=self._probe_store,
            upstream=self._probe_upstream,
            listener=lambda: bool(self.listeners) and all(x.accepting for x in self.listeners),
        )
        metrics.install_live_state(self._live_state)
        self.admin = AdminServer(
            create_app(probes, self.group_admin, self.security), admin_host, admin_port
        )
        await self.admin.start()

    def _live_state(self) -> dict[str, Any]:
        by_state: dict[str, int] = {s.value: 0 for s in GroupState}
        for group in self.coordinator.groups.values():
            by_state[group.state.value] += 1
        in_flight: dict[tuple[str, str], int] = {}
        detail: dict[tuple[str, str, int], dict[str, int]] = {}
        for key, leader in list(self.partitions.leaders.items()):
            sp = leader.sp
            for r in sp.ranges:
                slot = (key.group_id, r.state.name.lower())
                in_flight[slot] = in_flight.get(slot, 0) + r.last - r.first + 1
            lag = partition_lag(
                sp.spso,
                sp.speo,
                ((r.first, r.last, r.state) for r in sp.ranges),
                max(leader.cache.high_watermark, sp.speo),
            )
            detail[(key.group_id, leader.topic, key.partition)] = {
                "lag": lag.lag,
                "records": sum(lag.in_flight.values()),
                "batches": len(sp.ranges),
            }
        return {
            "groups_by_state": by_state,
            "partitions": len(self.partitions.leaders),
            "sessions": len(self.sessions),
            "in_flight": in_flight,
            "rebalances": {g: group.rebalances for g, group in self.coordinator.groups.items()},
            "partitions_detail": detail,
            "connections": {k: v for x in self.listeners for k, v in x.open_connections().items()},
        }

    async def _connect_upstream(self) -> None:
        delay = 0.5
        while True:
            try:
                await self.upstream.start()
                return
            except UpstreamError as exc:
                log.warning("upstream not reachable yet (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10)

    async def _probe_store(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("select 1"))

    async def _probe_upstream(self) -> None:
        await self.upstream.refresh_metadata([])

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
        await asyncio.gather(*(x.stop() for x in self.listeners))
        await self.security.stop()
        await self.coordinator.stop()
        await self.partitions.stop()
        await self.committer.stop()
        await self.upstream.close()
        await self.engine.dispose()


def _upstream_settings(s: Settings) -> UpstreamSettings:
    """How the proxy itself authenticates to the upstream cluster."""
    tls = None
    if s.upstream_security_protocol in ("SSL", "SASL_SSL"):
        tls = listeners.client_ssl_context(
            s.upstream_ssl_cafile, s.upstream_ssl_certfile, s.upstream_ssl_keyfile
        )
    sasl = s.upstream_security_protocol.startswith("SASL_")
    return UpstreamSettings(
        s.bootstrap_servers,
        security_protocol=s.upstream_security_protocol,
        sasl_mechanism=s.upstream_sasl_mechanism if sasl else None,
        sasl_plain_username=s.upstream_sasl_username if sasl else None,
        sasl_plain_password=(
            s.upstream_sasl_password.get_secret_value()
            if sasl and s.upstream_sasl_password
            else None
        ),
        ssl_context=tls,
    )


async def serve(settings: Settings) -> None:
    proxy = Proxy(settings)
    await proxy.start(auto_migrate=settings.auto_migrate)
    log.info(
        "shareproxy serving %s, upstream %s, state store %s",
        ", ".join(
            f"{x.protocol} on {x.host}:{x.port} (advertised {proxy.listener_address(x.protocol)})"
            for x in proxy.listeners
        ),
        settings.bootstrap_servers,
        async_url(settings.state_url).render_as_string(hide_password=True),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    started = time.monotonic()
    log.info("stopping: no new connections; answering requests in flight")
    await proxy.stop()
    log.info("stopped", extra={"seconds": round(time.monotonic() - started, 3)})
