"""The CLI's client of a running proxy's REST admin API: where it is, how to authenticate,
how refusals and an unreachable proxy end the command, and the table/JSON output choice the
``groups``, ``users`` and ``acls`` commands share."""

from __future__ import annotations

import json
import os
from enum import StrEnum
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from shareproxy import exits, terminal

out = terminal.stdout()  # tables complete when piped
err = Console(stderr=True, soft_wrap=True)


class Output(StrEnum):
    table = "table"
    json = "json"


Url = Annotated[
    str,
    typer.Option(
        "--admin-url",
        envvar="SHAREPROXY_ADMIN_URL",
        help="the proxy's admin API (env SHAREPROXY_ADMIN_URL)",
    ),
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table or json")]
DEFAULT_URL = "http://127.0.0.1:8080"


def credentials() -> dict[str, Any]:
    """From the environment, never the command line: SHAREPROXY_ADMIN_TOKEN (bearer) or
    SHAREPROXY_ADMIN_USER with SHAREPROXY_ADMIN_PASSWORD (HTTP Basic)."""
    token = os.environ.get("SHAREPROXY_ADMIN_TOKEN")
    if token:
        return {"headers": {"Authorization": f"Bearer {token}"}}
    user = os.environ.get("SHAREPROXY_ADMIN_USER")
    if user:
        return {"auth": (user, os.environ.get("SHAREPROXY_ADMIN_PASSWORD", ""))}
    return {}


def call(method: str, url: str, path: str, **kwargs: Any) -> Any:
    """One API call; a refusal is a message and exit code 1, an unreachable proxy, or one
    whose own dependencies are out of reach (503), exit 3."""
    try:
        response = httpx.request(
            method, url.rstrip("/") + path, timeout=60, **credentials(), **kwargs
        )
    except httpx.HTTPError as exc:
        err.print(f"[red]error:[/red] cannot reach the admin API at {url}: {exc}")
        raise typer.Exit(exits.UNAVAILABLE) from exc
    if response.status_code >= 400:
        try:
            problem = response.json()
            text = f"{problem.get('error_code')}: {problem.get('message')}"
        except ValueError:
            text = response.text[:500]
        err.print(f"[red]error:[/red] {text} (HTTP {response.status_code})")
        raise typer.Exit(exits.UNAVAILABLE if response.status_code == 503 else exits.FAILED)
    return response.json() if response.content else None


def as_json(data: Any) -> None:
    out.print_json(json.dumps(data))
