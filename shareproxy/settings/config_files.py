"""The ``--config`` file: pydantic-settings' TOML and YAML readers, with the environment
variables a file names (``references``) read in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from shareproxy.settings import references
from shareproxy.settings.problems import SettingsInvalid


def file_source(settings_cls: type[BaseSettings], path: Path) -> PydanticBaseSettingsSource:
    """pydantic-settings' reader for the file's kind, by its suffix, with the environment
    variables the file names (``references``) read in."""
    if path.suffix == ".toml":
        return _Toml(settings_cls, path)
    if path.suffix in (".yaml", ".yml"):
        return _Yaml(settings_cls, path)
    raise SettingsInvalid(f"--config {path}: use a .toml, .yaml or .yml file")


def _referenced(data: dict[str, Any], path: Path) -> dict[str, Any]:
    expanded, missing = references.expand(data, os.environ)
    if missing:
        raise SettingsInvalid(f"--config {path}: {missing}")
    return expanded


class _Toml(TomlConfigSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls, path)
        self.path = path

    def __call__(self) -> dict[str, Any]:
        return _referenced(super().__call__(), self.path)


class _Yaml(YamlConfigSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls, path)
        self.path = path

    def __call__(self) -> dict[str, Any]:
        return _referenced(super().__call__(), self.path)
