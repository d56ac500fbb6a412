"""What every command prints through: stdout (tables complete when piped), stderr, and a
failure's lines with the exit code of its kind. Light on purpose: the commands that only call a
running proxy import it, and must not load the server to print."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from shareproxy.core.failures import Failure
from shareproxy.host import exits, terminal
from shareproxy.telemetry.secrets import hide_passwords

out = terminal.stdout()
err = Console(stderr=True, soft_wrap=True)

# every Typer app of the CLI: plain help (wrapped, never cut at the terminal width) and no
# locals in a bug's traceback (they would print settings' secrets)
TYPER_STYLE: dict[str, Any] = {
    "add_completion": False,
    "rich_markup_mode": None,
    "pretty_exceptions_show_locals": False,
}


def fail(exc: Failure) -> typer.Exit:
    """Print the error's line(s), any URL's password hidden, and make the exit that carries
    its code."""
    for line in hide_passwords(str(exc)).splitlines():
        err.print(f"[red]error:[/red] {escape(line)}")
    return typer.Exit(exits.code_of(exc))
