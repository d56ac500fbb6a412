"""What is wrong with settings, as the loader and the file readers report it."""

from __future__ import annotations

from shareproxy.core.failures import BadInput


class SettingsInvalid(BadInput):
    """Settings that cannot be used: one line per bad value, naming where it came from (the
    flag, the variable or the file)."""


class SettingError(ValueError):
    """A value that only makes sense with others, blamed on one setting."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting
