"""The ``shareproxy`` command."""

from __future__ import annotations

from typing import Annotated

import typer
import uvloop
from rich.console import Console

from shareproxy import __version__, cli_batch
from shareproxy.cli_groups import groups
from shareproxy.cli_security import acls, users
from shareproxy.config import Settings
from shareproxy.persistence.engine import StateUrlError, async_url, usable_url

app = typer.Typer(
    name="shareproxy",
    help="Share groups (KIP-932, Queues for Kafka) for Kafka clusters that do not have them.",
    no_args_is_help=True,
    add_completion=False,
)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)
app.add_typer(groups, name="groups")
app.add_typer(users, name="users")
app.add_typer(acls, name="acls")
cli_batch.register(app)

StateUrl = Annotated[
    str | None,
    typer.Option(
        "--state-url",
        help="SQLAlchemy URL of the state store (env SHAREPROXY_STATE_URL); "
        "default: an embedded SQLite file",
        show_default=False,
    ),
]


def _state_url(option: str | None) -> str:
    url = option or Settings().state_url
    try:
        usable_url(url)
    except StateUrlError as exc:
        err.print(f"[red]error:[/red] --state-url: {exc}")
        raise typer.Exit(2) from exc
    return url


@app.command()
def migrate(
    state_url: StateUrl = None,
    check: Annotated[
        bool, typer.Option("--check", help="only report whether the schema is current")
    ] = False,
) -> None:
    """Create or upgrade the state-store schema (Alembic migrations)."""
    from shareproxy.persistence import migrate as migrations

    url = _state_url(state_url)
    shown = async_url(url).render_as_string(hide_password=True)
    try:
        if check:
            current, head = migrations.schema_status(url)
            if current == head:
                out.print(f"schema of {shown} is current (revision {head})")
                return
            err.print(
                f"schema of {shown} is at {current or 'nothing'}, expected {head}: "
                "run `shareproxy migrate`"
            )
            raise typer.Exit(1)
        migrations.upgrade(url)
        current, head = migrations.schema_status(url)
    except typer.Exit:
        raise
    except Exception as exc:  # a store we cannot reach or write: say so, exit non-zero
        err.print(f"[red]error:[/red] migrating {shown} failed: {type(exc).__name__}: {exc}")
        raise typer.Exit(1) from exc
    out.print(f"migrated {shown} to revision {current}")


@app.command()
def serve(
    bootstrap_servers: Annotated[
        str | None,
        typer.Option(help="upstream Kafka bootstrap servers (env SHAREPROXY_BOOTSTRAP_SERVERS)"),
    ] = None,
    listen: Annotated[str | None, typer.Option(help="Kafka listener HOST:PORT")] = None,
    advertised_listener: Annotated[
        str | None, typer.Option(help="HOST:PORT given to clients in metadata")
    ] = None,
    state_url: StateUrl = None,
    admin_listen: Annotated[str | None, typer.Option(help="REST admin HOST:PORT")] = None,
    record_lock_duration_ms: Annotated[
        int | None, typer.Option(help="default share.record.lock.duration.ms")
    ] = None,
    delivery_count_limit: Annotated[
        int | None, typer.Option(help="default share.delivery.count.limit")
    ] = None,
    auto_offset_reset: Annotated[
        str | None, typer.Option(help="default share.auto.offset.reset")
    ] = None,
    isolation_level: Annotated[
        str | None,
        typer.Option(help="default share.isolation.level: read_uncommitted | read_committed"),
    ] = None,
    listeners: Annotated[
        str | None,
        typer.Option(help="PROTOCOL://HOST:PORT,… (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
    ] = None,
    advertised_listeners: Annotated[
        str | None, typer.Option(help="PROTOCOL://HOST:PORT,… told to clients per listener")
    ] = None,
    ssl_certfile: Annotated[str | None, typer.Option(help="listener certificate (PEM)")] = None,
    ssl_keyfile: Annotated[str | None, typer.Option(help="listener private key (PEM)")] = None,
    ssl_cafile: Annotated[
        str | None, typer.Option(help="CA certificates for client certificates (PEM)")
    ] = None,
    ssl_client_auth: Annotated[str | None, typer.Option(help="none | requested | required")] = None,
    sasl_enabled_mechanisms: Annotated[
        str | None, typer.Option(help="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 (the default)")
    ] = None,
    super_users: Annotated[
        str | None, typer.Option(help="User:a;User:b, allowed everything")
    ] = None,
    authorization: Annotated[
        str | None,
        typer.Option(help="auto (ACLs on when a listener authenticates) | on | off"),
    ] = None,
    upstream_security_protocol: Annotated[
        str | None, typer.Option(help="PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL")
    ] = None,
    upstream_sasl_mechanism: Annotated[
        str | None, typer.Option(help="PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512")
    ] = None,
    upstream_sasl_username: Annotated[
        str | None,
        typer.Option(
            help="the proxy's user upstream (password: SHAREPROXY_UPSTREAM_SASL_PASSWORD)"
        ),
    ] = None,
    upstream_ssl_cafile: Annotated[
        str | None, typer.Option(help="CAs to verify the upstream brokers")
    ] = None,
    migrate: Annotated[
        bool | None,
        typer.Option(
            "--migrate/--no-migrate",
            help="upgrade the store schema at start (env SHAREPROXY_AUTO_MIGRATE; default on)",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    ] = None,
    log_format: Annotated[
        str | None, typer.Option(help="plain | json (env SHAREPROXY_LOG_FORMAT; default plain)")
    ] = None,
) -> None:
    """Serve share groups to Kafka share consumers, reading topics from the upstream cluster."""
    import asyncio

    from pydantic import ValidationError

    from shareproxy import logs
    from shareproxy.config import split_host_port
    from shareproxy.core.errors import ShareError
    from shareproxy.server import Proxy, SchemaBehind
    from shareproxy.server import serve as run_server

    overrides = {
        k: v
        for k, v in {
            "bootstrap_servers": bootstrap_servers,
            "listen": listen,
            "advertised_listener": advertised_listener,
            "state_url": state_url,
            "admin_listen": admin_listen,
            "record_lock_duration_ms": record_lock_duration_ms,
            "delivery_count_limit": delivery_count_limit,
            "auto_offset_reset": auto_offset_reset,
            "isolation_level": isolation_level,
            "auto_migrate": migrate,
            "listeners": listeners,
            "advertised_listeners": advertised_listeners,
            "ssl_certfile": ssl_certfile,
            "ssl_keyfile": ssl_keyfile,
            "ssl_cafile": ssl_cafile,
            "ssl_client_auth": ssl_client_auth,
            "sasl_enabled_mechanisms": sasl_enabled_mechanisms,
            "super_users": super_users,
            "authorization": authorization,
            "upstream_security_protocol": upstream_security_protocol,
            "upstream_sasl_mechanism": upstream_sasl_mechanism,
            "upstream_sasl_username": upstream_sasl_username,
            "upstream_ssl_cafile": upstream_ssl_cafile,
            "log_level": log_level.upper() if log_level else None,
            "log_format": log_format,
        }.items()
        if v is not None
    }
    try:
        settings = Settings(**overrides)
        split_host_port(settings.listen)
        if settings.advertised_listener:
            split_host_port(settings.advertised_listener)
        Proxy(settings)  # listeners, TLS and SASL settings checked before anything starts
    except (ValidationError, ValueError) as exc:
        err.print(f"[red]error:[/red] invalid setting: {exc}")
        raise typer.Exit(2) from exc
    _state_url(settings.state_url)
    logs.configure(settings.log_level, settings.log_format)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run_server(settings))
    except (SchemaBehind, ShareError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    except OSError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc


@app.command()
def demo(
    records: Annotated[int, typer.Option(min=1, help="records to produce")] = 3000,
    partitions: Annotated[int, typer.Option(min=1, help="partitions of the demo topic")] = 3,
    consumers: Annotated[int, typer.Option(min=1, help="share consumers")] = 3,
) -> None:
    """Run everything embedded: a Tansu broker, SQLite state, the proxy and share consumers."""
    from shareproxy.demo import run_demo

    if not run_demo(records, partitions, consumers, out):
        raise typer.Exit(1)


@app.command()
def version() -> None:
    """Print the shareproxy version."""
    out.print(__version__)


if __name__ == "__main__":
    app()
