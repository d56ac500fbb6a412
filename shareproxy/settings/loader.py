"""Settings read from their sources, each bad value explained, and written back as a file.

Kept apart from ``model`` (what the settings are and which values each takes): this is how a
value reaches them — a ``serve`` flag, a ``SHAREPROXY_*`` variable, the ``--config`` file — and
how an error names the one the user wrote.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict

from shareproxy.settings.config_files import file_source
from shareproxy.settings.model import ENV_PREFIX, FLAG_NAMES, SECRET, Settings
from shareproxy.settings.problems import SettingError, SettingsInvalid
from shareproxy.settings.references import reference
from shareproxy.telemetry.secrets import HIDDEN, hide_passwords


def load(flags: Mapping[str, Any] | None = None, config_file: Path | None = None) -> Settings:
    """Settings from flags, environment, file and defaults; SettingsInvalid naming every bad value
    (one line each) and where it came from."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    cls: type[Settings] = Settings
    file_data: dict[str, Any] = {}
    if config_file is not None:
        file_data = _read(config_file)
        config = SettingsConfigDict(**Settings.model_config)
        if config_file.suffix == ".toml":
            config["toml_file"] = config_file
        else:
            config["yaml_file"] = config_file
        cls = type("Settings", (Settings,), {"model_config": config, "__module__": __name__})
    try:
        return cls(**flags)
    except ValidationError as exc:
        lines = [_explain(e, flags, file_data, config_file) for e in exc.errors()]
        raise SettingsInvalid(hide_passwords("\n".join(dict.fromkeys(lines)))) from None


def _read(path: Path) -> dict[str, Any]:
    """The file's settings as its source reads them; SettingsInvalid naming the file."""
    kind = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML"}.get(path.suffix)
    if kind is None:
        raise SettingsInvalid(f"--config {path}: use a .toml, .yaml or .yml file")
    if not path.is_file():
        raise SettingsInvalid(f"--config {path}: no such file")
    try:
        data = file_source(Settings, path)()
    except SettingsInvalid:
        raise
    except Exception as exc:  # tomllib / yaml: the message says where in the file
        detail = hide_passwords(" ".join(str(exc).split()))  # it may quote the line
        raise SettingsInvalid(f"--config {path}: not valid {kind}: {detail}") from None
    return dict(data)


def source_of(
    setting: str, flags: Mapping[str, Any], file_data: Mapping[str, Any], path: Path | None
) -> str:
    """Where a setting's value came from, written as the user wrote it."""
    if setting in flags:
        flag = FLAG_NAMES.get(setting, "--" + setting.replace("_", "-"))
        return f"{flag} {_shown(setting, flags[setting])}"
    env = ENV_PREFIX + setting.upper()
    if env in {k.upper() for k in os.environ}:
        value = next(v for k, v in os.environ.items() if k.upper() == env)
        return f"{env}={_shown(setting, value)}"
    if setting in file_data:
        return f"{setting} = {_shown(setting, file_data[setting])} in {path}"
    return f"{setting} (default {_shown(setting, Settings.model_fields[setting].default)})"


def _shown(setting: str, value: Any) -> str:
    return HIDDEN if setting in SECRET else hide_passwords(str(value))


def _explain(
    error: Any, flags: Mapping[str, Any], file_data: Mapping[str, Any], path: Path | None
) -> str:
    cause = (error.get("ctx") or {}).get("error")
    setting = cause.setting if isinstance(cause, SettingError) else None
    if setting is None and error["loc"]:
        setting = str(error["loc"][0])
    if error["type"] == "extra_forbidden":
        where = f"in {path}" if setting in file_data else "given"
        return f"unknown setting {setting!r} {where} (`shareproxy serve --help` lists them)"
    reason = str(cause) if cause is not None else error["msg"]
    if setting is None or setting not in Settings.model_fields:
        return f"invalid settings: {reason}"
    return f"{source_of(setting, flags, file_data, path)}: {reason}"


def render(settings: Settings, environ: Mapping[str, str] = os.environ) -> str:
    """The settings in force as a TOML config file, each with its description; a secret (a
    password, a URL holding one) as a reference to the variable it is read from."""
    lines = []
    for name, info in Settings.model_fields.items():
        lines.append(f"# {info.description}")
        value = getattr(settings, name)
        variable = ENV_PREFIX + name.upper()
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if value is None:
            lines.append(f"# {name} =")
        elif name in SECRET or (isinstance(value, str) and hide_passwords(value) != value):
            if environ.get(variable) != value:
                lines.append(f"# it holds a secret: set {variable} to serve with this file")
            lines.append(f"{name} = {json.dumps(reference(variable))}")
        elif isinstance(value, bool):
            lines.append(f"{name} = {'true' if value else 'false'}")
        elif isinstance(value, int):
            lines.append(f"{name} = {value}")
        else:
            lines.append(f"{name} = {json.dumps(value)}")  # a TOML basic string
    return "\n".join(lines) + "\n"
