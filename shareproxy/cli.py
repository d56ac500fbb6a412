"""The ``shareproxy`` command."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from shareproxy import __version__
from shareproxy.config import Settings
from shareproxy.persistence.engine import StateUrlError, async_url

app = typer.Typer(
    name="shareproxy",
    help="Share groups (KIP-932, Queues for Kafka) for Kafka clusters that do not have them.",
    no_args_is_help=True,
    add_completion=False,
)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

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
        async_url(url)
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
def version() -> None:
    """Print the shareproxy version."""
    out.print(__version__)


if __name__ == "__main__":
    app()
