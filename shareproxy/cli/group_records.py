"""``shareproxy groups records | records-act | release-member``: single in-flight records seen
and changed through a running proxy's admin API."""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import typer
from rich.table import Table

from shareproxy.cli.admin_client import (
    DEFAULT_URL,
    Output,
    OutputOpt,
    Url,
    as_json,
    call,
    err,
    out,
    seg,
)
from shareproxy.host import exits

Partition = Annotated[str, typer.Argument(metavar="TOPIC:PARTITION")]


def register(groups: typer.Typer) -> None:
    groups.command("records")(records)
    groups.command("records-act")(records_act)
    groups.command("release-member")(release_member)


def records(
    group: str,
    partition: Partition,
    from_offset: Annotated[int | None, typer.Option("--from-offset", min=0)] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="ranges")] = 100,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """A share-partition's in-flight records from SPSO to SPEO: state, delivery count, the
    member holding them and when its lock ends."""
    params: dict[str, int] = {"limit": limit}
    if from_offset is not None:
        params["from_offset"] = from_offset
    data = call("GET", admin_url, _path(group, partition) + "/records", params=params)
    _show(data, output)


def records_act(
    group: str,
    partition: Partition,
    offsets: Annotated[str, typer.Option("--offsets", help="an offset, or FIRST-LAST")],
    release: Annotated[bool, typer.Option("--release", help="Acquired → Available")] = False,
    accept: Annotated[
        bool, typer.Option("--accept", help="skip: Available or Acquired → Acknowledged")
    ] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="Available or Acquired → Archived")
    ] = False,
    deliver: Annotated[
        bool,
        typer.Option("--deliver", help="Available records waiting for their time: due now"),
    ] = False,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Release, accept (skip), reject or deliver now offsets of a share-partition: all of them
    or none."""
    flags = (("release", release), ("accept", accept), ("reject", reject), ("deliver", deliver))
    chosen = [name for name, given in flags if given]
    if len(chosen) != 1:
        _usage("give exactly one of --release, --accept, --reject, --deliver")
    first_text, sep, last_text = offsets.partition("-")
    try:
        first = int(first_text)
        last = int(last_text) if sep else first
    except ValueError:
        _usage(f"--offsets {offsets!r}: expected an offset or FIRST-LAST")
    body = {"first_offset": first, "last_offset": last}
    path = f"{_path(group, partition)}/records/{chosen[0]}"
    _show(call("POST", admin_url, path, json=body), output)


def release_member(
    group: str,
    member: str,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """End every acquisition lock a member holds in the group (a consumer that hangs while
    it heartbeats): its records are Available again, delivery counts kept."""
    path = f"/v1/share-groups/{seg(group)}/members/{seg(member)}/release"
    data = call("POST", admin_url, path)
    if output is Output.json:
        return as_json(data)
    table = Table("TOPIC", "PARTITION", "OFFSETS RELEASED")
    for p in data["released"]:
        runs = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in p["offsets"])
        table.add_row(p["topic"], str(p["partition"]), runs)
    out.print(table)
    for node in data["unreached"]:
        err.print(f"[yellow]warning:[/yellow] not released on {node}")


def _path(group: str, partition: str) -> str:
    topic, sep, number = partition.rpartition(":")
    if not sep or not topic or not number.isdigit():
        _usage(f"{partition!r}: expected TOPIC:PARTITION")
    return f"/v1/share-groups/{seg(group)}/partitions/{seg(topic)}/{number}"


def _show(data: Any, output: Output) -> None:
    if output is Output.json:
        return as_json(data)
    out.print(
        f"{data['topic']}:{data['partition']} of group {data['group_id']}: "
        f"start {data['start_offset']}, end {data['end_offset']}"
    )
    # a column of its own while any range waits for its delivery time or back-off
    timed = any(r.get("deliverable_at") for r in data["records"])
    columns = ["FIRST", "LAST", "STATE", "DELIVERIES", "MEMBER", "LOCK ENDS"]
    table = Table(*columns, *(["DELIVERABLE AT"] if timed else []))
    for r in data["records"]:
        table.add_row(
            str(r["first_offset"]),
            str(r["last_offset"]),
            r["state"],
            str(r["delivery_count"]),
            r["member_id"] or "-",
            r["lock_expires_at"] or "-",
            *([r.get("deliverable_at") or "-"] if timed else []),
        )
    out.print(table)
    if data["next_offset"] is not None:
        out.print(f"more: --from-offset {data['next_offset']}")


def _usage(message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(exits.USAGE)
