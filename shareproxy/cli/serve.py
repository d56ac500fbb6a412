"""``shareproxy serve``: one flag per setting, made from ``model.Settings`` so that each setting
has one name, one description and one validation, whether given as a flag, an environment
variable or a key of the ``--config`` file."""

from __future__ import annotations

import inspect
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

import typer
import typer.main

from shareproxy.cli.output import TYPER_STYLE, err, fail, out
from shareproxy.core.failures import Failure
from shareproxy.host.cores import usable_cores
from shareproxy.settings import loader, model
from shareproxy.settings.model import MAX_NODES


def _metavar(annotation: Any) -> tuple[type, str]:
    """(what typer parses, the metavar): flags are parsed as text and validated by pydantic
    alone, like the same value from the environment or the file; booleans are switches."""
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        if len(kinds) == 1:
            return _metavar(kinds[0])
        return str, "|".join(_metavar(a)[1] for a in kinds)
    if annotation is bool:
        return bool, ""
    if get_origin(annotation) is Literal:
        return str, "|".join(get_args(annotation))
    return str, {int: "INTEGER"}.get(annotation, "TEXT")


def _options() -> list[inspect.Parameter]:
    params = []
    for name, field in model.Settings.model_fields.items():
        if name in model.SECRET:
            continue
        kind, metavar = _metavar(field.annotation)
        env = f"{model.ENV_PREFIX}{name.upper()}"
        default = "" if field.default is None else f"; default {field.default}"
        flag = model.FLAG_NAMES.get(name)
        option = typer.Option(
            *([flag] if flag else []),
            help=f"{field.description} (env {env}{default})",
            metavar=metavar or None,
        )
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                # typing.Optional, not ``kind | None``: older typer reads only the former
                annotation=Annotated[Optional[kind], option],  # noqa: UP045
            )
        )
    return params


def serve(config_file: Path | None = None, print_config: bool = False, **flags: Any) -> None:
    """Serve share groups to Kafka share consumers, reading topics from the upstream cluster.

    Each setting is a flag, else SHAREPROXY_<NAME>, else a key of --config, else its default."""
    import asyncio

    import uvloop

    from shareproxy.host.allocator import keep_freed_memory
    from shareproxy.node.proxy import serve as run_server
    from shareproxy.telemetry import logs

    try:
        settings = loader.load(flags, config_file)
    except Failure as exc:
        raise fail(exc) from exc
    if print_config:
        out.print(loader.render(settings), markup=False, highlight=False, end="")
        return
    count = settings.nodes if isinstance(settings.nodes, int) else min(usable_cores(), MAX_NODES)
    if settings.nodes == model.AUTO:
        err.print(
            f"--nodes auto: {count} node{'s' * (count > 1)}, one per core this process may use"
        )
    if count > 1:
        from shareproxy.cli.nodes import supervise

        try:
            code = supervise(settings, count, flags, config_file)
        except Failure as exc:
            raise fail(exc) from exc
        raise typer.Exit(code)
    logs.configure(settings.log_level, settings.log_format)
    keep_freed_memory(settings.log_cache_bytes)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run_server(settings))
    except Failure as exc:
        raise fail(exc) from exc


def command() -> Any:
    """The ``serve`` command, built when it is named (or help lists it): its flags come from
    the settings model, whose import (pydantic, the store's URL checks) the commands that only
    call a running proxy do without."""
    own = [
        inspect.Parameter(
            "config_file",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                Optional[Path],  # noqa: UP045
                typer.Option(
                    "--config",
                    metavar="FILE",
                    help="a TOML or YAML file of settings (keys as --print-config writes them); "
                    "flags and SHAREPROXY_* variables override it",
                ),
            ],
        ),
        inspect.Parameter(
            "print_config",
            inspect.Parameter.KEYWORD_ONLY,
            default=False,
            annotation=Annotated[
                bool,
                typer.Option(
                    "--print-config",
                    help="print the settings in force, with their descriptions, as a TOML "
                    "config file, and exit",
                ),
            ],
        ),
    ]
    params = own + _options()

    def run(**values: Any) -> None:
        serve(values.pop("config_file"), values.pop("print_config"), **values)

    run.__doc__ = serve.__doc__
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # typer reads it
    run.__annotations__ = {p.name: p.annotation for p in params}
    app = typer.Typer(**TYPER_STYLE)
    app.command("serve")(run)
    return typer.main.get_command(app)
