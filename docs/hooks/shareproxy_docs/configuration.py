"""The configuration reference: every ``serve`` setting from the settings model and every group
config from its definition, with the names a user writes them under. The flags are read from the
``serve`` command itself, which is made from the same model."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from shareproxy.cli import serve
from shareproxy.core import group_config as gc
from shareproxy.settings import model
from shareproxy.settings.group_defaults import GROUP_DEFAULTS
from shareproxy_docs.markdown import code, generated_from, text

SOURCES = (
    "the settings model (`shareproxy/settings/model.py`, `group_defaults.py`), the `serve` "
    "command made from it (`shareproxy/cli/serve.py`) and the group configs' definitions "
    "(`shareproxy/core/group_config.py`)"
)
_KINDS = {str: "text", int: "integer", float: "number", bool: "boolean", SecretStr: "text (secret)"}
_CONFIG_KINDS = {"int": "integer", "double": "number", "string": "text", "boolean": "boolean"}


def page() -> str:
    flags = _flags()
    setting_of = {config: setting for setting, config in GROUP_DEFAULTS.items()}
    bounded_by = _bounding_settings()
    lines = [
        generated_from(SOURCES),
        "## Settings of `shareproxy serve`",
        "",
        "Each setting is read from its flag, else its environment variable, else its key in the "
        "`--config` file (TOML or YAML, with the keys below), else it takes its default. "
        "`shareproxy serve --print-config` prints the settings in force as such a file. "
        "A bad value stops the node at start with one line naming the flag, variable or file "
        "it came from (exit code 2).",
        "",
    ]
    for name, field in model.Settings.model_fields.items():
        lines += _setting(name, field, flags.get(name), setting_of)
    lines += [
        "## Group configs",
        "",
        "A share group's own configs, as Kafka's GROUP config resource holds them. Every one is "
        "dynamic: it is set per group while the group runs, with `shareproxy groups config "
        "GROUP --set NAME=VALUE`, `PUT /v1/share-groups/{group_id}/config` or Kafka's "
        "IncrementalAlterConfigs (`kafka-configs.sh --entity-type groups`), and is in force "
        "for the group's next fetch, lock and heartbeat. A group without a value of its own "
        "takes the proxy-wide default, a `serve` setting above.",
        "",
    ]
    for name, definition in gc.DEFINITIONS.items():
        lines += _group_config(definition, setting_of[name], bounded_by.get(name, []))
    return "\n".join(lines)


def _flags() -> dict[str, list[str]]:
    """Each setting's flags as ``serve`` takes them (a secret has none)."""
    command = serve.command()
    return {p.name: [*p.opts, *p.secondary_opts] for p in command.params if p.name}


def _bounding_settings() -> dict[str, list[str]]:
    """The group config each ``group_share_min/max_*`` setting bounds -> those settings."""
    stems = {stem: config for config, stem in gc.BOUNDED.items()}
    found: dict[str, list[str]] = {}
    for setting in model.Settings.model_fields:
        for prefix in ("group_share_min_", "group_share_max_"):
            config = stems.get(setting.removeprefix(prefix)) if setting.startswith(prefix) else None
            if config is not None:
                found.setdefault(config, []).append(setting)
    return found


def _setting(
    name: str, field: FieldInfo, flags: list[str] | None, setting_of: dict[str, str]
) -> list[str]:
    env = model.ENV_PREFIX + name.upper()
    if flags:
        flag = ", ".join(code(f) for f in flags)
    else:
        flag = "none: the environment or the `--config` file only"
    lines = [
        f"### `{name}` {{#{name}}}",
        "",
        text(field.description or ""),
        "",
        f"- flag: {flag}",
        f"- environment: {code(env)}",
        f"- config file key (TOML or YAML): {code(name)}",
        f"- type: {_kind(field.annotation)}",
        f"- default: {_default(field.default)}",
    ]
    bounds = _bounds(field)
    if bounds:
        lines.append(f"- bounds: {bounds}")
    config = GROUP_DEFAULTS.get(name)
    if config is not None:
        lines.append(f"- the proxy-wide default of the group config [{config}](#{config})")
    return [*lines, ""]


def _group_config(definition: gc.ConfigDef, setting: str, bounded_by: list[str]) -> list[str]:
    name = definition.name
    lines = [
        f"### `{name}` {{#{name}}}",
        "",
        text(definition.doc),
        "",
        f"- type: {_CONFIG_KINDS.get(definition.kind, definition.kind)}",
        f"- default: {_default(definition.default)}, unless `serve` sets another: "
        f"[`{setting}`](#{setting})",
        f"- values: {_values(definition.check)}",
        "- dynamic: yes",
    ]
    if bounded_by:
        links = " and ".join(f"[`{s}`](#{s})" for s in bounded_by)
        lines.append(f"- on a node, also within {links} (Kafka's broker-level bounds)")
    return [*lines, ""]


def _kind(annotation: Any) -> str:
    """A setting's type as a user writes its value."""
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [_kind(a) for a in get_args(annotation) if a is not type(None)]
        return " or ".join(kinds)
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(code(str(a)) for a in get_args(annotation))
    return _KINDS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return code("true" if value else "false")
    return code(str(value))


def _bounds(field: FieldInfo) -> str:
    """The numeric range the model enforces (pydantic's ``ge``/``le``/``gt``/``lt``)."""
    found = []
    for item in field.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, attribute, None)
            if value is not None:
                found.append(f"{sign} {value}")
    return ", ".join(found)


def _values(check: Any) -> str:
    """The values a group config's check accepts: a range or choices, read from the check
    (a dataclass, or a closure over its bounds or choices); else its documentation says."""
    if isinstance(check, gc.IntBetween):
        return f"an integer from {check.low} to {check.high}"
    names = getattr(getattr(check, "__code__", None), "co_freevars", ())
    cells = getattr(check, "__closure__", None) or ()
    captured = {n: c.cell_contents for n, c in zip(names, cells, strict=True)}
    if "choices" in captured:
        return "one of " + ", ".join(code(c) for c in captured["choices"])
    if {"low", "high"} <= captured.keys():
        return f"a number from {captured['low']:g} to {captured['high']:g}"
    return "as described above"
