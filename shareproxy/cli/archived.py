"""``shareproxy groups archived`` and ``groups redrive``: a group's archived records, and copies
of them produced back to their source topic once (the REST archived resources)."""

from __future__ import annotations

from typing import Annotated, Any

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


def archived(
    group: str,
    topic: Annotated[str | None, typer.Option("--topic", help="only this topic")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", min=0, help="only this partition (with --topic)")
    ] = None,
    from_: Annotated[
        int | None, typer.Option("--from", min=0, help="ranges ending at or after this offset")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="at most this many")] = None,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """A group's archived records: why, how often delivered, when, and whether redriven."""
    params: dict[str, Any] = {
        k: v
        for k, v in (("topic", topic), ("partition", partition), ("from", from_), ("limit", limit))
        if v is not None
    }
    data = call("GET", admin_url, f"/v1/share-groups/{seg(group)}/archived", params=params)
    if output is Output.json:
        return as_json(data)
    table = Table("TOPIC", "PARTITION", "OFFSETS", "REASON", "DELIVERIES", "ARCHIVED", "REDRIVEN")
    for a in data["archived"]:
        first, last = a["first_offset"], a["last_offset"]
        table.add_row(
            a["topic"] or a["topic_id"],
            str(a["partition"]),
            str(first) if first == last else f"{first}-{last}",
            a["reason"],
            str(a["delivery_count"]),
            a["archived_at"],
            a["redriven_at"] or "-",
        )
    out.print(table)
    if data["next_from"] is not None:
        out.print(f"more: --from {data['next_from']}")
    elif data["more"]:
        out.print("more: raise --limit, or list one --topic/--partition with --from")
    for p in data["dead_letters_waiting"]:
        problem = f" ({p['problem']})" if p["problem"] else ""
        out.print(
            f"{p['topic']}-{p['partition']}: {p['waiting']} waiting for the dead-letter "
            f"topic{problem}"
        )


def offset_ranges(text: str) -> list[tuple[int, int]]:
    """``5-9,12`` as [(5, 9), (12, 12)]; exit 2 with a message on anything else."""
    ranges = []
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        try:
            lo, hi = int(first), int(last) if sep else int(first)
        except ValueError:
            lo, hi = -1, -1
        if lo < 0 or hi < lo:
            err.print(f"[red]error:[/red] --offsets {text!r}: expected ranges like 5-9,12")
            raise typer.Exit(2)
        ranges.append((lo, hi))
    return ranges


def redrive(
    group: str,
    topic: Annotated[str, typer.Option("--topic", help="the source topic")],
    partition: Annotated[int, typer.Option("--partition", min=0)],
    offsets: Annotated[
        str | None,
        typer.Option("--offsets", help="e.g. 5-9,12; all the partition's archived if absent"),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="produce (default: a dry run)")
    ] = False,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Produce archived records again to their source topic, once (with origin headers)."""
    if offsets is None:
        records: list[dict[str, Any]] = [{"topic": topic, "partition": partition}]
    else:
        records = [
            {"topic": topic, "partition": partition, "first_offset": a, "last_offset": b}
            for a, b in offset_ranges(offsets)
        ]
    body = {"records": records, "dry_run": not execute}
    data = call("POST", admin_url, f"/v1/share-groups/{seg(group)}/archived/redrive", json=body)
    if output is Output.json:
        return as_json(data)
    table = Table("TOPIC", "PARTITION", "REDRIVE", "ALREADY REDRIVEN", "NEW OFFSETS")
    for p in data["partitions"]:
        new = [o for r in p["produced"] for o in r["new_offsets"]]
        table.add_row(
            p["topic"],
            str(p["partition"]),
            _ranges(p["redrive"]),
            _ranges(p["already_redriven"]),
            _ranges([(o, o) for o in new]) if new else "-",
        )
    out.print(table)
    if data["dry_run"]:
        out.print(
            f"dry run: {data['records']} records would be redriven (use --execute to produce)"
        )
    elif data["result"] == "already redriven":
        out.print("already redriven: nothing produced")
    else:
        out.print(f"redriven: {data['records']} records produced to their source topic")


def _ranges(ranges: list[Any]) -> str:
    if not ranges:
        return "-"
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def register(groups: typer.Typer) -> None:
    """Add these commands to ``shareproxy groups``."""
    groups.command()(archived)
    groups.command()(redrive)
