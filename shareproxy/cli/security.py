"""``shareproxy users …`` and ``shareproxy acls …``: through a running proxy's admin API, or,
with ``--state-url``, straight in the store (to create the first administrator)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from shareproxy.cli import admin_client
from shareproxy.cli.admin_client import (
    DEFAULT_URL,
    LOGIN,
    Output,
    OutputOpt,
    Url,
    as_json,
    call,
    err,
    out,
)
from shareproxy.host import exits

T = TypeVar("T")

_THROUGH_API = (
    f"Through a running proxy's admin API; with security on, log in from the environment: {LOGIN}."
)
users = typer.Typer(
    help=f"Users (SCRAM credentials) for SASL and the admin API. {_THROUGH_API} Or, with "
    "--state-url, straight in the store (the first administrator)."
)
acls = typer.Typer(help=f"ACL rules, as Kafka defines them. {_THROUGH_API}")

StoreUrl = Annotated[
    str | None,
    typer.Option(
        "--state-url",
        help="write the store directly instead of calling a proxy (bootstrap the first admin)",
    ),
]


def _direct(state_url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work`` on the store itself: a bad URL exits 2; a store that is down or has no
    schema yet exits 3, saying which store and what to do."""
    import asyncio

    from shareproxy.cli.output import fail
    from shareproxy.core.failures import BadInput, Failure
    from shareproxy.persistence.engine import StateUrlError, create_engine, shown_url, store_errors
    from shareproxy.persistence.migrate import require_current
    from shareproxy.security.store import SecurityStore

    async def run() -> T:
        try:
            engine = create_engine(state_url)
        except StateUrlError as exc:
            raise BadInput(f"--state-url {shown_url(state_url)}: {exc}") from exc
        try:
            with store_errors(shown_url(state_url)):
                await require_current(state_url)
                return await work(SecurityStore(engine))
        finally:
            await engine.dispose()

    try:
        return asyncio.run(run())
    except Failure as exc:
        raise fail(exc) from exc


def _read_password(password_stdin: bool) -> str:
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif not sys.stdin.isatty():  # a prompt would read nothing there, and end at EOF
        err.print(
            "[red]error:[/red] no terminal to prompt for the password: "
            "pipe it with --password-stdin"
        )
        raise typer.Exit(exits.USAGE)
    else:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        err.print("[red]error:[/red] the password must not be empty")
        raise typer.Exit(2)
    return password


@users.command("add")
def add_user(
    name: str,
    password_stdin: Annotated[
        bool,
        typer.Option(help="read the password's one line from stdin (else: prompt at the terminal)"),
    ] = False,
    admin_url: Url = DEFAULT_URL,
    state_url: StoreUrl = None,
) -> None:
    """Create a user or set a new password (SCRAM-SHA-256 and -512 credentials)."""
    from shareproxy.security.scram import InvalidUser, make_credentials

    password = _read_password(password_stdin)
    if state_url:
        try:
            creds = make_credentials(name, password)
        except InvalidUser as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from exc
        created = _direct(state_url, lambda store: store.put_credentials(creds))
    else:
        call("POST", admin_url, "/v1/users", json={"name": name, "password": password})
        created = True
    out.print(f"user {name} {'created' if created else 'updated'}")


@users.command("list")
def list_users(
    admin_url: Url = DEFAULT_URL, state_url: StoreUrl = None, output: OutputOpt = Output.table
) -> None:
    """Users and their SCRAM mechanisms (never passwords)."""
    if state_url:
        creds = _direct(state_url, lambda store: store.credentials())
        by_user: dict[str, list[str]] = {}
        for c in creds:
            by_user.setdefault(c.username, []).append(c.mechanism)
        data: Any = [{"name": u, "mechanisms": sorted(m)} for u, m in sorted(by_user.items())]
    else:
        data = call("GET", admin_url, "/v1/users")
    if output is Output.json:
        return as_json(data)
    table = Table("USER", "MECHANISMS")
    for u in data:
        table.add_row(u["name"], ", ".join(u["mechanisms"]))
    out.print(table)


@users.command("remove")
def remove_user(name: str, admin_url: Url = DEFAULT_URL, state_url: StoreUrl = None) -> None:
    """Delete a user (its tokens too)."""
    if state_url:
        if not _direct(state_url, lambda store: store.delete_user(name)):
            err.print(f"[red]error:[/red] no user {name!r}")
            raise typer.Exit(1)
    else:
        call("DELETE", admin_url, f"/v1/users/{admin_client.seg(name)}")
    out.print(f"user {name} removed")


# ---------------------------------------------------------------------------------- ACLs
Principal = Annotated[str | None, typer.Option(help="User:name or User:*")]
Host = Annotated[str | None, typer.Option(help="client address or *")]
Group = Annotated[str | None, typer.Option("--group", help="a Group resource")]
Topic = Annotated[str | None, typer.Option("--topic", help="a Topic resource")]
Cluster = Annotated[bool, typer.Option("--cluster", help="the Cluster resource")]
TransactionalId = Annotated[
    str | None, typer.Option("--transactional-id", help="a TransactionalId resource")
]
Pattern = Annotated[str | None, typer.Option("--pattern", help="LITERAL or PREFIXED")]
Operation = Annotated[str | None, typer.Option("--operation", help="Read, Describe, Alter, …")]


_ONE_OF = "--group, --topic, --transactional-id, --cluster"


def _resource(
    group: str | None, topic: str | None, cluster: bool, transactional_id: str | None = None
) -> tuple[str, str] | None:
    named = (("GROUP", group), ("TOPIC", topic), ("TRANSACTIONAL_ID", transactional_id))
    chosen = [(t, n) for t, n in named if n] + ([("CLUSTER", "kafka-cluster")] if cluster else [])
    if len(chosen) > 1:
        err.print(f"[red]error:[/red] give one of {_ONE_OF}")
        raise typer.Exit(2)
    return chosen[0] if chosen else None


def _show(data: list[dict[str, Any]], output: Output) -> None:
    if output is Output.json:
        return as_json(data)
    table = Table("PRINCIPAL", "HOST", "RESOURCE", "PATTERN", "NAME", "OPERATION", "PERMISSION")
    for a in data:
        table.add_row(
            a["principal"],
            a["host"],
            a["resource_type"],
            a["pattern_type"],
            a["resource_name"],
            a["operation"],
            a["permission"],
        )
    out.print(table)
    return None


@acls.command("add")
def add_acl(
    principal: Annotated[str, typer.Option(help="User:name or User:*")],
    operation: Annotated[list[str], typer.Option("--operation", help="repeatable")],
    group: Group = None,
    topic: Topic = None,
    cluster: Cluster = False,
    transactional_id: TransactionalId = None,
    pattern: Annotated[str, typer.Option("--pattern", help="LITERAL or PREFIXED")] = "LITERAL",
    host: Annotated[str, typer.Option(help="client address or *")] = "*",
    deny: Annotated[bool, typer.Option("--deny", help="a DENY rule (default ALLOW)")] = False,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Add rules: one per operation."""
    resource = _resource(group, topic, cluster, transactional_id)
    if resource is None:
        err.print(f"[red]error:[/red] give one of {_ONE_OF}")
        raise typer.Exit(2)
    body = [
        {
            "principal": principal,
            "host": host,
            "resource_type": resource[0],
            "resource_name": resource[1],
            "pattern_type": pattern,
            "operation": op,
            "permission": "DENY" if deny else "ALLOW",
        }
        for op in operation
    ]
    _show(call("POST", admin_url, "/v1/acls", json=body), output)


def _filter(
    principal: str | None,
    host: str | None,
    resource: tuple[str, str] | None,
    pattern: str | None,
    operation: str | None,
) -> dict[str, str]:
    params = {"principal": principal, "host": host, "pattern_type": pattern, "operation": operation}
    if resource:
        params["resource_type"], params["resource_name"] = resource
    return {k: v for k, v in params.items() if v is not None}


@acls.command("list")
def list_acls(
    principal: Principal = None,
    host: Host = None,
    group: Group = None,
    topic: Topic = None,
    cluster: Cluster = False,
    transactional_id: TransactionalId = None,
    pattern: Pattern = None,
    operation: Operation = None,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Rules matching the filter (all without one)."""
    params = _filter(
        principal, host, _resource(group, topic, cluster, transactional_id), pattern, operation
    )
    _show(call("GET", admin_url, "/v1/acls", params=params), output)


@acls.command("remove")
def remove_acls(
    principal: Principal = None,
    host: Host = None,
    group: Group = None,
    topic: Topic = None,
    cluster: Cluster = False,
    transactional_id: TransactionalId = None,
    pattern: Pattern = None,
    operation: Operation = None,
    all_rules: Annotated[bool, typer.Option("--all", help="remove every rule")] = False,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Remove the rules matching the filter; prints what was removed."""
    params: dict[str, Any] = _filter(
        principal, host, _resource(group, topic, cluster, transactional_id), pattern, operation
    )
    if not params and not all_rules:
        err.print("[red]error:[/red] give a filter, or --all to remove every rule")
        raise typer.Exit(2)
    if all_rules:
        params["all"] = "true"
    _show(call("DELETE", admin_url, "/v1/acls", params=params), output)
