"""The CLI reference: every command of the ``shareproxy`` typer app, walked in the click command
tree typer builds, with what its ``--help`` shows: help, usage, arguments and options. Only the
click API both click and typer's own copy of it share is used (``get_help_record``,
``get_usage``), so the page reads as ``--help`` does with any typer the ranges allow."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import typer.main

from shareproxy.cli.app import app
from shareproxy.settings.model import Settings
from shareproxy_docs.markdown import cell, code, generated_from, text

SOURCES = "the `shareproxy` command's typer app (`shareproxy/cli/`)"
SERVE = "shareproxy serve"  # its options are the settings the configuration page describes


def commands() -> Iterator[tuple[str, Any, Any]]:
    """(command path, command, its context) for the root and every command under it, in the
    order ``--help`` lists them; hidden ones left out, as ``--help`` leaves them."""
    root: Any = typer.main.get_command(app)
    root_ctx = root.make_context("shareproxy", [], resilient_parsing=True)
    stack = [("shareproxy", root, root_ctx)]
    while stack:
        path, command, ctx = stack.pop(0)
        yield path, command, ctx
        if hasattr(command, "list_commands"):
            found = []
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is None or getattr(sub, "hidden", False):
                    continue
                sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
                found.append((f"{path} {name}", sub, sub_ctx))
            stack[:0] = found  # depth first: a group's commands right after it


def anchor(path: str) -> str:
    return path.replace(" ", "-")


def page() -> str:
    lines = [
        generated_from(SOURCES),
        "Every command takes `--help`, which prints what its section here says. A command "
        "ends with one of the [exit codes](exit-codes.md).",
        "",
    ]
    for path, command, ctx in commands():
        level = "#" * min(2 + max(path.count(" ") - 1, 0), 4)
        lines += [f"{level} `{path}` {{#{anchor(path)}}}", ""]
        lines += _help(command.help)
        lines += ["```text", command.get_usage(ctx).strip(), "```", ""]
        params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
        for kind, title in (("argument", "argument"), ("option", "option")):
            settings = Settings.model_fields if path == SERVE else {}
            rows = [_row(p, ctx, p.name in settings) for p in params if p.param_type_name == kind]
            if rows:
                lines += [f"| {title} | description |", "|---|---|", *rows, ""]
        subcommands = list(command.list_commands(ctx)) if hasattr(command, "list_commands") else []
        if subcommands and path != "shareproxy":
            links = ", ".join(f"[`{n}`](#{anchor(f'{path} {n}')})" for n in subcommands)
            lines += [f"Commands: {links}.", ""]
    return "\n".join(lines)


def _help(value: str | None) -> list[str]:
    """A command's help as ``--help`` shows it: its docstring up to click's ``\\f``."""
    if not value:
        return []
    return [text(inspect.cleandoc(value.split("\f")[0])), ""]


def _row(param: Any, ctx: Any, setting: bool) -> str:
    record = param.get_help_record(ctx) or (param.human_readable_name, "")
    names, help_text = record
    help_text = help_text.replace("\\[", "[")  # older typer escapes rich markup in plain help
    link = f" ([setting](configuration.md#{param.name}))" if setting else ""
    return f"| {code(names)} | {cell(help_text)}{link} |"
