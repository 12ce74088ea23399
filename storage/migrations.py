"""The schema's only way to change: the Alembic migrations of ``migrations/``, up or down."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from storage.connection import sqlalchemy_url


def _alembic_config(database_url: str) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    # ConfigParser treats '%' as interpolation; URLs may carry percent-escapes.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return config


def upgrade_database(database_url: str, revision: str = "head") -> None:
    """Apply the Alembic migrations up to ``revision``; the only way dragoman changes the schema."""
    from alembic import command

    command.upgrade(_alembic_config(database_url), revision)


def downgrade_database(database_url: str, revision: str = "base") -> None:
    """Revert the Alembic migrations down to ``revision``."""
    from alembic import command

    command.downgrade(_alembic_config(database_url), revision)
