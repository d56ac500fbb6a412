"""Proxy-wide settings: command-line options fall back to ``SHAREPROXY_*`` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_URL = "sqlite:///shareproxy-state.db"


def split_host_port(value: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``) → (host, port); ValueError with a clear message otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not HOST:PORT")
    return (host.strip("[]") or default_host), int(port)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SHAREPROXY_", extra="ignore")

    state_url: str = Field(
        default=DEFAULT_STATE_URL,
        description="SQLAlchemy URL of the state store: Postgres in production, SQLite embedded",
    )
    state_fold_every: int = Field(
        default=50, ge=1, description="update rows per share-partition before a new snapshot"
    )
    bootstrap_servers: str = Field(default="localhost:9092", description="upstream Kafka")
    listen: str = Field(default="0.0.0.0:9092", description="Kafka listener HOST:PORT")
    advertised_listener: str | None = Field(
        default=None, description="HOST:PORT clients are told to connect to"
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
    ssl_cafile: str | None = Field(default=None, description="CAs for client certificates")
    ssl_client_auth: Literal["none", "requested", "required"] = Field(default="none")
    sasl_enabled_mechanisms: str = Field(default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    super_users: str = Field(default="", description="User:a;User:b — always allowed")
    authorization: Literal["auto", "on", "off"] = Field(
        default="auto", description="ACLs enforced; auto: when a listener authenticates"
    )
    upstream_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = (
        "PLAINTEXT"
    )
    upstream_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    upstream_sasl_username: str | None = None
    upstream_sasl_password: SecretStr | None = None
    upstream_ssl_cafile: str | None = None
    upstream_ssl_certfile: str | None = None
    upstream_ssl_keyfile: str | None = None
    admin_listen: str = Field(default="127.0.0.1:8080", description="REST admin HOST:PORT")
    node_id: int = Field(default=1, ge=0, description="the broker id the proxy presents")
    auto_migrate: bool = Field(
        default=True, description="upgrade the store schema at start (off: run `migrate` first)"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO")
    log_format: Literal["plain", "json"] = Field(default="plain", description="plain | json")
    max_frame_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    max_share_sessions: int = Field(default=1000, ge=1)
    # proxy-wide group config defaults (KIP-932 names in comments)
    record_lock_duration_ms: int = Field(default=30_000, ge=100)  # share.record.lock.duration.ms
    delivery_count_limit: int = Field(default=5, ge=2, le=10)  # share.delivery.count.limit
    partition_max_record_locks: int = Field(default=2000, ge=1)
    auto_offset_reset: str = Field(default="latest")  # share.auto.offset.reset
    isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        default="read_uncommitted"
    )  # share.isolation.level
    session_timeout_ms: int = Field(default=45_000, ge=1000)  # share.session.timeout.ms
    heartbeat_interval_ms: int = Field(default=5_000, ge=100)  # share.heartbeat.interval.ms
    group_max_size: int = Field(default=200, ge=1)
