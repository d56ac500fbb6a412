"""``shareproxy groups …``: the REST admin API from a terminal (tables, or ``--output json``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

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
    seg,
)
from shareproxy.cli.group_resets import delete, reset_offsets

groups = typer.Typer(
    help="Manage share groups through a running proxy's admin API. With security on, log in "
    f"from the environment: {LOGIN}."
)
Topics = Annotated[list[str] | None, typer.Option("--topic", help="a topic (repeatable)")]


@groups.command("list")
def list_groups(
    state: Annotated[list[str] | None, typer.Option(help="Empty, Stable or Dead")] = None,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """List share groups: state, members, topics, lag and how long the oldest record not yet
    acknowledged has waited (LAG AGE)."""
    data = call("GET", admin_url, "/v1/share-groups", params={"state": state or []})
    if output is Output.json:
        return as_json(data)
    table = Table("GROUP", "STATE", "MEMBERS", "TOPICS", "LAG", "LAG AGE")
    for g in data:
        table.add_row(
            g["group_id"],
            g["state"],
            str(g.get("members", "-")),
            ",".join(g.get("topics", [])) or "-",
            "-" if g.get("lag") is None else str(g["lag"]),
            _age(g.get("oldest_unacked_age_seconds")),
        )
    out.print(table)


def _age(seconds: float | None) -> str:
    """A wait for a person to read: 0s, 42s, 5m 3s, 2h 10m, 3d 4h; - when unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size, small, small_size in (
        ("d", 86_400, "h", 3_600),
        ("h", 3_600, "m", 60),
        ("m", 60, "s", 1),
    ):
        if s >= size:
            return f"{s // size}{unit} {s % size // small_size}{small}"
    return f"{s}s"


@groups.command()
def describe(
    group: Annotated[str | None, typer.Argument(help="the group (or --all-groups)")] = None,
    all_groups: Annotated[
        bool, typer.Option("--all-groups", help="every share group, one after another")
    ] = False,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """A group's state, epochs and members with their assignments (json with --all-groups:
    a list, one object per group)."""
    if (group is None) != all_groups:
        err.print("[red]error:[/red] give a GROUP or --all-groups (exactly one)")
        raise typer.Exit(2)
    if group is not None:
        data = call("GET", admin_url, f"/v1/share-groups/{seg(group)}")
        return as_json(data) if output is Output.json else _print_group(data)
    names = [g["group_id"] for g in call("GET", admin_url, "/v1/share-groups")]
    described = [call("GET", admin_url, f"/v1/share-groups/{seg(name)}") for name in names]
    if output is Output.json:
        return as_json(described)
    for i, data in enumerate(described):
        if i:
            out.print()
        _print_group(data)


def _print_group(data: dict[str, Any]) -> None:
    out.print(
        f"group [bold]{data['group_id']}[/bold]: {data['state']}, group epoch "
        f"{data['group_epoch']}, assignment epoch {data['assignment_epoch']} "
        f"({data['assignor']} assignor)"
    )
    table = Table("MEMBER", "CLIENT", "HOST", "SUBSCRIPTIONS", "ASSIGNMENT", "HEARTBEAT")
    for m in data["members"]:
        assignment = ", ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in m["assignment"].items())
        table.add_row(
            m["member_id"],
            m["client_id"],
            m["host"],
            ",".join(m["subscriptions"]),
            assignment,
            _ago(m["last_heartbeat"]),
        )
    out.print(table)


@groups.command()
def offsets(
    group: str,
    topic: Topics = None,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """SPSO, SPEO, in-flight records and lag per share-partition."""
    data = call(
        "GET", admin_url, f"/v1/share-groups/{seg(group)}/offsets", params={"topic": topic or []}
    )
    if output is Output.json:
        return as_json(data)
    columns = ["TOPIC", "PARTITION", "START", "END", "HIGH WATERMARK", "LAG", "IN FLIGHT"]
    # records waiting for their delivery time: a column of their own while any wait
    timed = any(p.get("waiting") for p in data["partitions"])
    table = Table(*columns, *(["WAITING (NEXT DUE)"] if timed else []))
    for p in data["partitions"]:
        in_flight = ", ".join(f"{k} {v}" for k, v in p["in_flight"].items() if v)
        waiting = (
            [f"{p['waiting']} ({p['next_delivery_at']})" if p.get("waiting") else "-"]
            if timed
            else []
        )
        table.add_row(
            p["topic"],
            str(p["partition"]),
            *(str(p[k]) if p[k] is not None else "-" for k in ("start_offset", "end_offset")),
            str(p["high_watermark"]) if p["high_watermark"] is not None else "-",
            str(p["lag"]) if p["lag"] is not None else (p["error_code"] or "-"),
            in_flight,
            *waiting,
        )
    out.print(table)
    total = data["total_lag"]
    out.print(
        f"total lag: {'unknown (the Kafka cluster did not answer)' if total is None else total}"
    )


groups.command("reset-offsets")(reset_offsets)


@groups.command("delete-offsets")
def delete_offsets(
    group: str,
    topic: Annotated[list[str], typer.Option("--topic", help="a topic (repeatable)")],
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Delete a group's state for topics it no longer subscribes to."""
    data = call(
        "DELETE", admin_url, f"/v1/share-groups/{seg(group)}/offsets", params={"topic": topic}
    )
    if output is Output.json:
        return as_json(data)
    out.print(f"deleted the offsets of {', '.join(data['topics'])} for group {group}")


groups.command()(delete)


@groups.command()
def config(
    group: str,
    set_: Annotated[list[str] | None, typer.Option("--set", help="NAME=VALUE (repeatable)")] = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", help="NAME: back to the default")
    ] = None,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Show a group's configs, or change them with --set / --unset."""
    changes: dict[str, str | None] = {}
    for item in set_ or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            err.print(f"[red]error:[/red] --set {item!r}: expected NAME=VALUE")
            raise typer.Exit(2)
        changes[name.strip()] = value.strip()
    for name in unset or []:
        changes[name] = None
    path = f"/v1/share-groups/{seg(group)}/config"
    if changes:
        data = call("PUT", admin_url, path, json={"configs": changes})
    else:
        data = call("GET", admin_url, path)
    if output is Output.json:
        return as_json(data)
    table = Table("CONFIG", "VALUE", "SOURCE")
    for name, entry in data["configs"].items():
        table.add_row(name, entry["value"], entry["source"])
    out.print(table)


def _ago(when: str) -> str:
    """How long ago an API time was, by this machine's clock (the API gives the time only)."""
    seconds = (datetime.now(UTC) - datetime.fromisoformat(when)).total_seconds()
    return f"{max(0.0, seconds):.1f} s ago"
