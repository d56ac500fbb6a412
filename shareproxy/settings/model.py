"""Proxy-wide settings, each documented and validated here once.

A setting comes from a ``serve`` flag, else a ``SHAREPROXY_*`` environment variable, else the
``--config`` file (TOML or YAML, read by pydantic-settings' own sources), else its default. The
settings that are group configs' defaults and bounds are defined in ``group_defaults``. A bad
value is reported as one line naming where it came from: the flag, the variable or the file.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from shareproxy.core import assignor
from shareproxy.core import dead_letter as dl
from shareproxy.core import group_config as gc
from shareproxy.core.persisted import DEFAULT_FOLD_EVERY
from shareproxy.core.share_group import DEFAULT_MAX_SIZE, MAX_MAX_SIZE, MIN_MAX_SIZE
from shareproxy.security.listeners import parse_listeners, plan, split_host_port
from shareproxy.settings.config_files import file_source
from shareproxy.settings.group_defaults import (
    GROUP_DEFAULTS,
    bound,
    config_text,
    defaults_problem,
    group_default,
)
from shareproxy.settings.problems import SettingError
from shareproxy.settings.push_targets import PushTargets

DEFAULT_STATE_URL = "sqlite:///shareproxy-state.db"
# the longest a ShareFetch from a client that asks one node at a time (librdkafka,
# kafka.client_software) is held on a node with nothing for it while other nodes serve. Measured
# on 2-3 nodes (BENCHMARKS.md): 100 ms gives half the throughput 50 ms gives, 20 ms a little
# more (0.38/0.32 of direct vs 0.33/0.23) for 60% more idle load, and an idle consumer costs the
# cluster 1.3% of a core at 50 ms against 0.3% at the 500 ms it asks
LIBRDKAFKA_FETCH_WAIT_MS = 50
MIN_LIBRDKAFKA_FETCH_WAIT_MS = 10  # below, idle consumers poll the nodes in a tight loop
# the longest any fetch is held, a minute (Kafka bounds no MaxWaitMs; a client's own request
# timeout ends a longer one anyway); a cap at or over the MaxWaitMs asked holds it as asked
MAX_FETCH_WAIT_MS = 60_000
AUTO = "auto"  # a --node-id leased from the store; --nodes: one per usable core
MAX_NODES = 64  # node processes one serve --nodes runs
ENV_PREFIX = "SHAREPROXY_"
FLAG_NAMES = {"auto_migrate": "--migrate/--no-migrate"}  # the rest: --field-name
SECRET = frozenset({"upstream_sasl_password"})  # environment or file only, never shown
_FILES = (
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cafile",
    "upstream_ssl_cafile",
    "upstream_ssl_certfile",
    "upstream_ssl_keyfile",
)


# the bound's default: a node starts at ~130 MiB resident, and one serving 1,000 members on
# 1,000 share-partitions is to stay within 250 MiB (bench.members); a few read-aheads of
# the upstream reads' size per busy partition fit under it
DEFAULT_LOG_CACHE_BYTES = 64 * 1024 * 1024
MIN_LOG_CACHE_BYTES = 1024 * 1024


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    state_url: str = Field(
        default=DEFAULT_STATE_URL,
        description="SQLAlchemy URL of the state store: postgresql://user:pass@host/db in "
        "production, sqlite:///path/state.db embedded",
    )
    bootstrap_servers: str = Field(
        default="localhost:9092", description="the upstream cluster's bootstrap servers"
    )
    fail_fast: bool = Field(
        default=False,
        description="exit (code 3) when the upstream cluster cannot be reached at start, "
        "instead of retrying with backoff until it can",
    )
    listen: str = Field(default="0.0.0.0:9092", description="Kafka listener HOST:PORT")
    advertised_listener: str | None = Field(
        default=None,
        description="HOST:PORT clients are told to connect to (default: the --listen address, "
        "or this host's name for one on every address, as Kafka does)",
    )
    listeners: str | None = Field(
        default=None,
        description="PROTOCOL://HOST:PORT,… (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); "
        "default PLAINTEXT on --listen",
    )
    advertised_listeners: str | None = Field(
        default=None, description="PROTOCOL://HOST:PORT,… clients are told, per listener"
    )
    ssl_certfile: str | None = Field(default=None, description="listener TLS certificate (PEM)")
    ssl_keyfile: str | None = Field(default=None, description="its private key (PEM)")
    ssl_cafile: str | None = Field(default=None, description="CAs for client certificates (PEM)")
    ssl_client_auth: Literal["none", "requested", "required"] = Field(
        default="none", description="client certificates: none | requested | required"
    )
    sasl_enabled_mechanisms: str = Field(
        default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", description="SASL mechanisms offered"
    )
    super_users: str = Field(default="", description="User:a;User:b, allowed everything")
    authorization: Literal["auto", "on", "off"] = Field(
        default="auto", description="ACLs enforced: auto (when a listener authenticates) | on | off"
    )
    upstream_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="how the proxy connects upstream"
    )
    upstream_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        default="PLAIN", description="the proxy's SASL mechanism upstream"
    )
    upstream_sasl_username: str | None = Field(
        default=None,
        description="the proxy's user upstream (password: SHAREPROXY_UPSTREAM_SASL_PASSWORD)",
    )
    upstream_sasl_password: SecretStr | None = Field(
        default=None, description="the proxy's password upstream (environment or file only)"
    )
    upstream_ssl_cafile: str | None = Field(default=None, description="CAs of the upstream (PEM)")
    upstream_ssl_certfile: str | None = Field(
        default=None, description="the proxy's client certificate upstream (PEM)"
    )
    upstream_ssl_keyfile: str | None = Field(default=None, description="its private key (PEM)")
    admin_listen: str = Field(default="127.0.0.1:8080", description="REST admin HOST:PORT")
    admin_advertised_url: str | None = Field(
        default=None,
        description="http(s)://HOST:PORT where the other nodes reach this node's admin API, to "
        "pass on calls about the groups it coordinates (default: http:// and the --admin-listen "
        "address, this host's name for one on every address, as for --advertised-listener)",
    )
    node_id: int | Literal["auto"] = Field(
        default=1,
        description="the broker id the proxy presents, one per node of a cluster (an id whose "
        "node is live is refused); auto: the lowest id no live node holds, leased from the store",
    )
    replace_node: bool = Field(
        default=False,
        description="take --node-id over even while the node holding it is live (that process "
        "stops); without it a held id is waited for until its lease passes, and refused (exit "
        "2) when its node renews the lease",
    )
    nodes: int | Literal["auto"] = Field(
        default=1,
        description="node processes to run on this machine (one asyncio loop each): node ids "
        "--node-id and up, every listener and admin port +1 per node; more than one needs a "
        "Postgres --state-url; auto: one per core this process may use (its CPU affinity and "
        f"cgroup CPU limit), at most {MAX_NODES}",
    )
    node_lease_ms: int = Field(
        default=10_000,
        ge=1000,
        le=300_000,
        description="how long a node stays live in the store without renewing (it renews every "
        "third of this); a node whose lease passed is not live",
    )
    librdkafka_fetch_wait_ms: int = Field(
        default=LIBRDKAFKA_FETCH_WAIT_MS,
        ge=MIN_LIBRDKAFKA_FETCH_WAIT_MS,
        le=MAX_FETCH_WAIT_MS,
        description="the longest a ShareFetch from a librdkafka-based client, which asks one "
        "node at a time, is held on a node with nothing for it while other nodes serve; shorter "
        "moves it on to records elsewhere sooner, at the cost of more empty fetches (its "
        "MaxWaitMs, 500, or more: held as asked; 10 at least)",
    )
    push_allowed_urls: str = Field(
        default="",
        description="the URL prefixes a share group's push may POST to, comma-separated (a "
        "URL is allowed when its scheme, host and port are a prefix's and its path continues "
        "the prefix's); empty: push is off on this node",
    )
    push_ca_bundle: str | None = Field(
        default=None,
        description="CAs that https push endpoints' certificates are verified against (PEM; "
        "default: the system's)",
    )
    auto_migrate: bool = Field(
        default=True, description="upgrade the store schema at start (off: run `migrate` first)"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="DEBUG | INFO | WARNING | ERROR"
    )
    log_format: Literal["plain", "json"] = Field(
        default="plain", description="plain | json (one object per line)"
    )
    state_fold_every: int = Field(
        default=DEFAULT_FOLD_EVERY,
        ge=1,
        description="update rows per share-partition before a new snapshot (Kafka's "
        "share.coordinator.snapshot.update.records.per.snapshot)",
    )
    max_frame_bytes: int = Field(
        default=100 * 1024 * 1024, ge=1024, description="largest Kafka request accepted"
    )
    log_cache_bytes: int = Field(
        default=DEFAULT_LOG_CACHE_BYTES,
        ge=MIN_LOG_CACHE_BYTES,
        description="the most the node's log caches hold of what they read from upstream (the "
        "fetched frames, counted whole): past it, no partition is read ahead and a consumer's "
        "read asks less; the cache spares the cluster re-reads by consumers sharing a partition",
    )
    group_share_max_share_sessions: int = Field(
        default=2000,
        ge=1,
        description="share sessions of the whole proxy (Kafka's group.share.max.share.sessions, "
        "its default)",
    )
    max_share_sessions_per_client: int = Field(
        default=1000,
        ge=1,
        description="share sessions one principal may hold from one host, so that no client "
        "can take them all",
    )
    share_group_retention_ms: int | None = Field(
        default=None,
        ge=1000,
        description="delete a share group empty for longer than this, and a live group's state "
        "for a topic no member has subscribed to for as long (offsets.retention.minutes "
        "semantics); unset: kept until deleted, as Kafka 4.1+ keeps share groups",
    )
    share_group_retention_check_interval_ms: int = Field(
        default=600_000,
        ge=100,
        description="how often expiry runs (Kafka's offsets.retention.check.interval.ms)",
    )
    group_share_max_groups: int | None = Field(
        default=None,
        ge=1,
        description="share groups the proxy holds at most; a heartbeat that would create one "
        "more is refused with GROUP_MAX_SIZE_REACHED (unset: no limit, as Kafka 4.1+)",
    )
    group_share_max_size: int = Field(
        default=DEFAULT_MAX_SIZE,
        ge=MIN_MAX_SIZE,
        le=MAX_MAX_SIZE,
        description="members per share group (Kafka's group.share.max.size, its default and range)",
    )
    group_share_assignors: str = Field(
        default=assignor.DEFAULT,
        description="the assignor every share group on this node uses (Kafka's "
        f"group.share.assignors, one name): {', '.join(assignor.ASSIGNORS)}",
    )
    record_lock_duration_ms: int = group_default(gc.LOCK_DURATION)
    delivery_count_limit: int = group_default(gc.DELIVERY_COUNT_LIMIT)
    partition_max_record_locks: int = group_default(gc.MAX_RECORD_LOCKS)
    auto_offset_reset: str = group_default(gc.AUTO_OFFSET_RESET)
    isolation_level: str = group_default(gc.ISOLATION_LEVEL)
    session_timeout_ms: int = group_default(gc.SESSION_TIMEOUT)
    heartbeat_interval_ms: int = group_default(gc.HEARTBEAT_INTERVAL)
    renew_acknowledge: bool = group_default(gc.RENEW_ACKNOWLEDGE)
    redelivery_backoff_initial_ms: int = group_default(gc.BACKOFF_INITIAL)
    redelivery_backoff_multiplier: float = group_default(gc.BACKOFF_MULTIPLIER)
    redelivery_backoff_max_ms: int = group_default(gc.BACKOFF_MAX)
    fair_acquisition: bool = group_default(gc.FAIR_ACQUISITION)
    key_ordering: bool = group_default(gc.KEY_ORDERING)
    dead_letter_topic: str = group_default(gc.DLQ_TOPIC)
    dead_letter_copy: bool = group_default(gc.DLQ_COPY)
    delivery_delay_ms: int = group_default(gc.DELIVERY_DELAY)
    max_delivery_delay_ms: int = group_default(gc.MAX_DELIVERY_DELAY)
    deliver_at_header: bool = group_default(gc.DELIVER_AT_HEADER)
    # the bounds of the group configs: Kafka's broker configs of the same names, defaults and
    # ranges (group.share.min.record.lock.duration.ms, …)
    group_share_min_record_lock_duration_ms: int = bound(
        "min_record_lock_duration_ms", 1000, 30_000
    )
    group_share_max_record_lock_duration_ms: int = bound(
        "max_record_lock_duration_ms", 30_000, 3_600_000
    )
    group_share_min_delivery_count_limit: int = bound("min_delivery_count_limit", 2, 5)
    group_share_max_delivery_count_limit: int = bound("max_delivery_count_limit", 5, 25)
    group_share_min_partition_max_record_locks: int = bound(
        "min_partition_max_record_locks", 100, 10_000
    )
    group_share_max_partition_max_record_locks: int = bound(
        "max_partition_max_record_locks", 100, 100_000
    )
    group_share_min_session_timeout_ms: int = bound("min_session_timeout_ms", 1, None)
    group_share_max_session_timeout_ms: int = bound("max_session_timeout_ms", 1, None)
    group_share_min_heartbeat_interval_ms: int = bound("min_heartbeat_interval_ms", 1, None)
    group_share_max_heartbeat_interval_ms: int = bound("max_heartbeat_interval_ms", 1, None)
    # Kafka's broker configs for dead-letter topics, under their names (KIP-1191)
    errors_deadletterqueue_topic_name_prefix: str = Field(
        default=dl.DEFAULT_TOPIC_PREFIX,
        description=f"{dl.TOPIC_PREFIX}: what every dead-letter topic's name starts with "
        "(empty: any name)",
    )
    errors_deadletterqueue_auto_create_topics_enable: bool = Field(
        default=False,
        description=f"{dl.AUTO_CREATE}: whether a missing dead-letter topic is created (with the "
        f"cluster's default partitions and replication, and {dl.GROUP_ENABLE}=true)",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init) > environment > config file (set by ``load``) > defaults."""
        config = settings_cls.model_config
        path = config.get("toml_file") or config.get("yaml_file")
        if path is None:
            return (init_settings, env_settings)
        return (init_settings, env_settings, file_source(settings_cls, Path(str(path))))

    def group_bounds(self) -> gc.GroupBounds:
        numbers = {  # group.share.min/max.*
            f.name: getattr(self, "group_share_" + f.name)
            for f in fields(gc.GroupBounds)
            if f.type == "int"
        }
        return gc.GroupBounds(
            **numbers, dead_letter_topic_prefix=self.errors_deadletterqueue_topic_name_prefix
        )

    def group_configs(self) -> dict[str, str]:
        """The group-config defaults under their config names, as strings."""
        return {name: config_text(getattr(self, s)) for s, name in GROUP_DEFAULTS.items()}

    @field_validator("group_share_assignors")
    @classmethod
    def _known_assignor(cls, value: str) -> str:
        if value not in assignor.ASSIGNORS:
            raise ValueError(f"unknown assignor (known: {', '.join(assignor.ASSIGNORS)})")
        return value

    @field_validator("push_allowed_urls")
    @classmethod
    def _push_targets(cls, value: str) -> str:
        PushTargets.parse(value)  # PushTargetError is a ValueError: the setting is named
        return value

    @field_validator("push_ca_bundle")
    @classmethod
    def _push_ca_bundle(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ssl.create_default_context(cafile=value)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"cannot load CA certificates from {value!r}: {exc}") from None
        return value

    def push_targets(self) -> PushTargets:
        return PushTargets.parse(self.push_allowed_urls)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator(*GROUP_DEFAULTS, mode="after")
    @classmethod
    def _group_config(cls, value: Any, info: Any) -> Any:
        """Each value alone; a bounded one only in ``_together``, against this node's bounds,
        so its refusal names the one range that accepts it."""
        name = GROUP_DEFAULTS[info.field_name]
        if name in gc.BOUNDED:
            return value
        try:
            gc.check(name, config_text(value))
        except gc.GroupConfigError as exc:
            raise ValueError(str(exc).partition(": ")[2]) from None
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, value: str) -> str:
        if not any(server.strip() for server in value.split(",")):  # else: retried forever
            raise ValueError("no server given (HOST:PORT,…)")
        return value

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if value != AUTO and not (isinstance(value, int) and 1 <= value <= MAX_NODES):
            raise ValueError(f"a number of nodes from 1 to {MAX_NODES}, or auto")
        return value

    @field_validator("node_id", mode="before")
    @classmethod
    def _node_id(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if value != AUTO and not (isinstance(value, int) and value >= 0):
            raise ValueError("an id is a whole number, 0 or more, or auto")
        return value

    @field_validator("listen", "admin_listen", "advertised_listener")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None:
            split_host_port(value)
        return value

    @field_validator("admin_advertised_url")
    @classmethod
    def _admin_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        scheme, sep, rest = value.partition("://")
        if scheme not in ("http", "https") or not sep or not rest.strip("/"):
            raise ValueError(f"{value!r} is not http://HOST:PORT or https://HOST:PORT")
        return value.rstrip("/")

    @field_validator("listeners", "advertised_listeners")
    @classmethod
    def _listeners(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listeners(value)
        return value

    @field_validator(*_FILES)
    @classmethod
    def _readable_file(cls, value: str | None) -> str | None:
        if value is not None:
            path = Path(value)
            if not path.exists():
                raise ValueError("no such file")
            if not path.is_file() or not os.access(path, os.R_OK):
                raise ValueError("not a readable file")
        return value

    @field_validator("state_url")
    @classmethod
    def _state_url(cls, value: str) -> str:
        from shareproxy.persistence.engine import usable_url

        usable_url(value)  # StateUrlError is a ValueError
        return value

    @field_validator("sasl_enabled_mechanisms")
    @classmethod
    def _mechanisms(cls, value: str) -> str:
        known = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        wrong = [m for m in (x.strip().upper() for x in value.split(",")) if m not in known]
        if wrong:
            raise ValueError(f"unknown SASL mechanisms {wrong} (known: {', '.join(known)})")
        return value

    @model_validator(mode="after")
    def _together(self) -> Settings:
        problem = defaults_problem(self.group_configs(), self.group_bounds(), self.model_fields_set)
        if problem is not None:
            raise SettingError(*problem)
        try:
            specs = plan(
                self.listeners, self.listen, self.advertised_listeners, self.advertised_listener
            )
        except ValueError as exc:
            raise SettingError("advertised_listeners", str(exc)) from None
        if any(spec.uses_tls for spec, _ in specs) and not self.ssl_certfile:
            raise SettingError("listeners", "an SSL or SASL_SSL listener needs --ssl-certfile")
        if self.nodes != 1 and not self.state_url.startswith("postgresql"):
            raise SettingError(
                "nodes",
                "several nodes share their state through a Postgres --state-url (postgresql://…)",
            )
        sasl = self.upstream_security_protocol.startswith("SASL_")
        if sasl and not self.upstream_sasl_username:
            raise SettingError("upstream_security_protocol", "needs --upstream-sasl-username")
        if sasl and self.upstream_sasl_password is None:
            raise SettingError(
                "upstream_security_protocol",
                f"needs a password: {ENV_PREFIX}UPSTREAM_SASL_PASSWORD or the --config file",
            )
        return self
