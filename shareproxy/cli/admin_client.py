"""The CLI's client of a running proxy's REST admin API: where it is, how to authenticate,
how refusals and an unreachable proxy end the command, and the table/JSON output choice the
``groups``, ``users`` and ``acls`` commands share."""

from __future__ import annotations

import json
import os
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.markup import escape

from shareproxy.cli.output import err, out
from shareproxy.host import exits
from shareproxy.telemetry.secrets import hide_passwords


class Output(StrEnum):
    table = "table"
    json = "json"


# the credentials the CLI sends, from the environment only (never on a command line)
TOKEN_ENV = "SHAREPROXY_ADMIN_TOKEN"
USER_ENV = "SHAREPROXY_ADMIN_USER"
PASSWORD_ENV = "SHAREPROXY_ADMIN_PASSWORD"
LOGIN = f"set {USER_ENV} and {PASSWORD_ENV}, or {TOKEN_ENV} (a token from POST /v1/tokens)"

Url = Annotated[
    str,
    typer.Option(
        "--admin-url",
        envvar="SHAREPROXY_ADMIN_URL",
        help="the proxy's admin API (env SHAREPROXY_ADMIN_URL); with security on, "
        f"log in from the environment: {LOGIN}",
    ),
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table or json")]
DEFAULT_URL = "http://127.0.0.1:8080"


def seg(name: str) -> str:
    """A name as one path segment: a group id may hold '/', '?', '#', '%' or spaces, or be
    "." or ".." (which an HTTP client would take for a step up the path unless encoded)."""
    if name in (".", ".."):
        return name.replace(".", "%2E")
    return quote(name, safe="")


def credentials() -> dict[str, Any]:
    """From the environment, never the command line: SHAREPROXY_ADMIN_TOKEN (bearer) or
    SHAREPROXY_ADMIN_USER with SHAREPROXY_ADMIN_PASSWORD (HTTP Basic)."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        return {"headers": {"Authorization": f"Bearer {token}"}}
    user = os.environ.get(USER_ENV)
    if user:
        return {"auth": (user, os.environ.get(PASSWORD_ENV, ""))}
    return {}


def login_hint() -> str:
    """What to do after a 401: which credentials were sent, or how to send some."""
    if os.environ.get(TOKEN_ENV):
        return f"the token in {TOKEN_ENV} was refused (expired or revoked?); {LOGIN}"
    if os.environ.get(USER_ENV):
        return f"{USER_ENV} and {PASSWORD_ENV} were refused; check them, or set {TOKEN_ENV}"
    return f"the admin API needs a login: {LOGIN}"


class Refused(Exception):
    """A call the API refused, or that did not reach it: the line to show, the exit code."""

    def __init__(self, text: str, exit_code: int) -> None:
        super().__init__(text)
        self.text, self.exit_code = text, exit_code


def attempt(method: str, url: str, path: str, **kwargs: Any) -> Any:
    """One API call; Refused when refused (exit code 1), or when the proxy is out of reach or
    its own dependencies are (503, exit 3)."""
    import httpx  # the commands that call the API load it; `serve` and the jobs never do

    try:
        response = httpx.request(
            method, url.rstrip("/") + path, timeout=60, **credentials(), **kwargs
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        where = hide_passwords(f"{url}: {exc}")
        raise Refused(f"cannot reach the admin API at {where}", exits.UNAVAILABLE) from exc
    if response.status_code >= 400:
        try:
            problem = response.json()
            text = f"{problem.get('error_code')}: {problem.get('message')}"
        except ValueError:
            text = response.text[:500]
        code = exits.UNAVAILABLE if response.status_code == 503 else exits.FAILED
        if response.status_code == 401:
            text = f"{text}; {login_hint()}"
        raise Refused(f"{text} (HTTP {response.status_code})", code)
    return response.json() if response.content else None


def call(method: str, url: str, path: str, **kwargs: Any) -> Any:
    """One API call; a refusal ends the command with its message and exit code."""
    try:
        return attempt(method, url, path, **kwargs)
    except Refused as exc:
        err.print(f"[red]error:[/red] {escape(exc.text)}")
        raise typer.Exit(exc.exit_code) from exc


def as_json(data: Any) -> None:
    out.print_json(json.dumps(data))
