"""``shareproxy groups reset-offsets`` and ``delete``: kafka-share-groups.sh's --reset-offsets
(with kafka-consumer-groups.sh's --by-duration and --shift-by) and --delete over the REST API."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from shareproxy.cli.admin_client import (
    DEFAULT_URL,
    Output,
    OutputOpt,
    Refused,
    Url,
    as_json,
    attempt,
    call,
    err,
    out,
    seg,
)
from shareproxy.core.errors import ShareError
from shareproxy.core.reset_csv import export_csv, parse_csv
from shareproxy.core.reset_plan import DATETIME_FORM
from shareproxy.host import exits

ResetTopics = Annotated[
    list[str] | None,
    typer.Option("--topic", help="a topic, or `topic:0,2` for some partitions (repeatable)"),
]


def _usage(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(exits.USAGE)


def reset_offsets(
    group: str,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help=f"{DATETIME_FORM}; UTC if no zone")
    ] = None,
    to_offset: Annotated[int | None, typer.Option("--to-offset", min=0)] = None,
    by_duration: Annotated[
        str | None, typer.Option("--by-duration", help="ISO-8601 duration: now less it, e.g. PT1H")
    ] = None,
    shift_by: Annotated[
        int | None, typer.Option("--shift-by", help="move the current start offset by N (+/-)")
    ] = None,
    to_current: Annotated[bool, typer.Option("--to-current")] = False,
    from_file: Annotated[
        Path | None, typer.Option("--from-file", help="a CSV plan: topic,partition,offset lines")
    ] = None,
    topic: ResetTopics = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="every topic the group has offsets for")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the plan (default)")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="apply the reset")] = False,
    export: Annotated[
        bool, typer.Option("--export", help="print the plan as CSV, for --from-file")
    ] = False,
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Move a group's start offsets (only while it has no members)."""
    targets: dict[str, Any] = {
        "earliest": to_earliest or None,
        "latest": to_latest or None,
        "datetime": to_datetime,
        "offset": to_offset,
        "duration": by_duration,
        "shift": shift_by,
        "current": to_current or None,
        "offsets": from_file,
    }
    chosen = [name for name, given in targets.items() if given is not None]
    if len(chosen) != 1:
        raise _usage(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, "
            "--by-duration, --shift-by, --to-current, --from-file"
        )
    if dry_run and execute:
        raise _usage("--dry-run and --execute exclude each other")
    if topic and all_topics:
        raise _usage("--topic and --all-topics exclude each other")
    if to_datetime is not None:
        _check_datetime(to_datetime)
    to = chosen[0]
    body: dict[str, Any] = {"to": to, "dry_run": not execute}
    if to == "offsets":
        if topic or all_topics:
            raise _usage("--from-file takes no --topic or --all-topics: the file names them")
        body["offsets"] = _read_plan(from_file, group)
    elif to not in ("earliest", "latest", "current"):
        body["datetime" if to == "datetime" else to] = targets[to]
    if topic:
        body["topics"] = topic
    data = call("POST", admin_url, f"/v1/share-groups/{seg(group)}/offsets/reset", json=body)
    if export:  # the CSV alone on stdout, to be saved for --from-file
        rows = [(p["topic"], p["partition"], p["new_start_offset"]) for p in data["partitions"]]
        sys.stdout.write(export_csv(rows))
        if data["dry_run"]:
            err.print("dry run: nothing changed (use --execute to apply)")
        return None
    if output is Output.json:
        return as_json(data)
    table = Table("TOPIC", "PARTITION", "CURRENT START", "NEW START")
    for p in data["partitions"]:
        current = p["current_start_offset"]
        table.add_row(
            p["topic"],
            str(p["partition"]),
            "-" if current is None else str(current),
            str(p["new_start_offset"]),
        )
    out.print(table)
    if data["dry_run"]:
        out.print("dry run: nothing changed (use --execute to apply)")
    return None


def _check_datetime(text: str) -> None:
    """A time the API takes, refused here with its form rather than as the API's field."""
    try:
        datetime.fromisoformat(text)
    except ValueError as exc:
        raise _usage(f"--to-datetime {text!r}: expected {DATETIME_FORM}") from exc


def _read_plan(path: Path | None, group: str) -> list[dict[str, Any]]:
    assert path is not None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise _usage(f"--from-file {path}: {exc}") from exc
    try:
        plan = parse_csv(text, group)
    except ShareError as exc:
        raise _usage(f"--from-file {path}: {exc.message}") from exc
    return [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(plan.items())]


def delete(
    group: Annotated[list[str], typer.Argument(help="one or more groups")],
    admin_url: Url = DEFAULT_URL,
    output: OutputOpt = Output.table,
) -> None:
    """Delete empty groups and all their state; each group's outcome is reported, and the exit
    code is not 0 if any was not deleted."""
    failed: dict[str, Refused] = {}
    deleted = []
    for g in dict.fromkeys(group):
        try:
            attempt("DELETE", admin_url, f"/v1/share-groups/{seg(g)}")
            deleted.append(g)
        except Refused as exc:
            failed[g] = exc
    if output is Output.json:
        results = [
            {"group_id": g, "deleted": g in deleted, "error": _why(failed.get(g))}
            for g in dict.fromkeys(group)
        ]
        as_json(results[0] if len(results) == 1 else results)
    else:
        for g, refused in failed.items():
            err.print(f"[red]error:[/red] share group {g} was not deleted: {escape(refused.text)}")
        if deleted:
            out.print(f"deleted share group{'s' if len(deleted) > 1 else ''} {', '.join(deleted)}")
    if failed:
        raise typer.Exit(max(refused.exit_code for refused in failed.values()))


def _why(refused: Refused | None) -> str | None:
    return None if refused is None else refused.text
