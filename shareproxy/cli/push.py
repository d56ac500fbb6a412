"""``shareproxy push …``: a share group's push to an HTTP endpoint, set, shown and removed
through a running proxy's admin API. The authorization is read from an environment variable,
never from the command line, where other users of the machine could read it."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from enum import StrEnum
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
from shareproxy.core import push_spec as ps
from shareproxy.host import exits

push = typer.Typer(
    help="Push a share group's records to an HTTP endpoint, each record one POST whose status "
    f"acknowledges it. With security on, log in from the environment: {LOGIN}."
)


class Ordered(StrEnum):
    none = "none"
    key = "key"


@push.command("set")
def set_push(
    group: str,
    url: Annotated[str, typer.Option(help="where to POST (under --push-allowed-urls)")],
    topic: Annotated[list[str], typer.Option("--topic", help="a topic to push (repeatable)")],
    max_in_flight: Annotated[
        int, typer.Option(help="requests under way at once, per node")
    ] = ps.DEFAULT_MAX_IN_FLIGHT,
    timeout_ms: Annotated[
        int, typer.Option(help="a request's time-out (cut to the record's lock)")
    ] = ps.DEFAULT_TIMEOUT_MS,
    ordered: Annotated[
        Ordered | None, typer.Option(help="key: one record of a key at a time, in order")
    ] = None,
    authorization_env: Annotated[
        str | None,
        typer.Option(help="the environment variable holding the Authorization header's value"),
    ] = None,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Set (or change) the group's push; it starts on every node within a second."""
    body: dict[str, Any] = {
        "url": url,
        "topics": topic,
        "max_in_flight": max_in_flight,
        "timeout_ms": timeout_ms,
    }
    if ordered is not None:
        body["ordered"] = ordered.value
    if authorization_env is not None:
        value = os.environ.get(authorization_env)
        if not value:
            err.print(f"[red]error:[/red] --authorization-env: {authorization_env} is not set")
            raise typer.Exit(exits.USAGE)
        body["authorization"] = value
    data = call("PUT", admin_url, f"/v1/share-groups/{seg(group)}/push", json=body)
    _show(data, output)


@push.command("show")
def show_push(group: str, admin_url: Url = DEFAULT_URL, output: OutputOpt = Output.table) -> None:
    """The group's push and its status over every node: outcomes, the endpoint's health and
    the last answers."""
    _show(call("GET", admin_url, f"/v1/share-groups/{seg(group)}/push"), output)


@push.command("remove")
def remove_push(group: str, admin_url: Url = DEFAULT_URL) -> None:
    """Stop the group's push on every node; records in flight are released."""
    call("DELETE", admin_url, f"/v1/share-groups/{seg(group)}/push")
    out.print(f"push of {group} removed")


def _show(data: dict[str, Any], output: Output) -> None:
    if output is Output.json:
        return as_json(data)
    status = data["status"]
    table = Table("PUSH", "VALUE", show_header=False)
    endpoint = status["endpoint"]
    if status["endpoint_down_since_ms"] is not None:
        endpoint += f" since {_time(status['endpoint_down_since_ms'])}"
    for name, value in (
        ("group", data["group_id"]),
        ("url", data["url"]),
        ("topics", ",".join(data["topics"])),
        ("max in flight", str(data["max_in_flight"])),
        ("timeout ms", str(data["timeout_ms"])),
        ("ordered", data["ordered"]),
        ("authorization", data["authorization"] or "-"),
        ("endpoint", endpoint),
        ("in flight", str(status["in_flight"])),
        ("outcomes", ", ".join(f"{k} {v}" for k, v in status["outcomes"].items())),
        *(("problem", p) for p in status["problems"]),
        *(("unreached", u) for u in data.get("unreached", [])),
    ):
        table.add_row(name, value)
    out.print(table)
    if status["recent"]:
        recent = Table("AT", "TOPIC", "PARTITION", "OFFSET", "DELIVERY", "STATUS", "OUTCOME", "MS")
        for r in status["recent"]:
            recent.add_row(
                _time(r["at_ms"]),
                r["topic"],
                str(r["partition"]),
                str(r["offset"]),
                str(r["delivery_count"]),
                "-" if r["status"] is None else str(r["status"]),
                r["outcome"],
                str(r["took_ms"]),
            )
        out.print(recent)
    return None


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")
