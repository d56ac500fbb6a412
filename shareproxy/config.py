"""Proxy-wide settings: command-line options fall back to ``SHAREPROXY_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_STATE_URL = "sqlite:///shareproxy-state.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SHAREPROXY_", extra="ignore")

    state_url: str = Field(
        default=DEFAULT_STATE_URL,
        description="SQLAlchemy URL of the state store: Postgres in production, SQLite embedded",
    )
    state_fold_every: int = Field(
        default=50, ge=1, description="update rows per share-partition before a new snapshot"
    )
