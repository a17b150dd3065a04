"""This process (``[node]``: data directory, database, HTTP) and its logs (``[logging]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from bzzz.config.base import _Section


class LoggingSettings(_Section):
    """Where and how much the node logs (always stderr or a file, never stdout)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    file: str | None = None
    format: Literal["text", "json"] = Field(
        "text", description="json: one JSON object per line, with the request id"
    )
    max_bytes: int = Field(
        10_000_000, ge=0, description="rotate the log file at this size (0: never)"
    )
    backups: int = Field(5, ge=0, description="rotated log files kept")

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


class NodeSettings(_Section):
    """This process: data directory, database, HTTP."""

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".bzzz")
    database_url: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = Field(7331, ge=0, le=65535)
    auth_tokens: list[str] = Field(default_factory=list)

    @field_validator("auth_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _check_db(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(
            ("sqlite+aiosqlite://", "postgresql+asyncpg://")
        ):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value
