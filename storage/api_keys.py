"""The ``api_keys`` table: the HTTP API's keys, each one a tenant's, stored as SHA-256 hashes only.

A key is 32 random bytes (``dgm_`` + URL-safe base64), so one unsalted SHA-256 is enough to make
the stored hash useless to whoever reads the table: there is nothing to guess. The key itself is
shown once, by ``dragoman api-key create``.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contract.errors import DragomanError
from contract.ids import canonical_uuid
from contract.schemas import validate_tenant
from storage.connection import AsyncConnectionPool

KEY_PREFIX = "dgm_"
_COLUMNS = "id::text, name, tenant, prefix, rate_limit_per_minute, created_at, revoked_at, max_queued_jobs, weight"


class ApiKeyNotFoundError(DragomanError, LookupError):
    """No API key with this id (or it is already revoked, where that matters)."""


def hash_api_key(key: str) -> str:
    """The hex SHA-256 of ``key``: what the table stores and what a request's key is looked up by."""
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One API key as stored (never the key itself): its id, label, tenant and limits."""

    id: str
    name: str
    tenant: str
    prefix: str
    rate_limit_per_minute: int | None
    created_at: datetime
    revoked_at: datetime | None
    max_queued_jobs: int | None = None
    weight: int = 1  # its tenant's share of each lane against other tenants' (fair share, issue 33)

    @property
    def active(self) -> bool:
        """Whether requests with this key are accepted."""
        return self.revoked_at is None


def _row(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(*row)


class ApiKeyStore:
    """The ``api_keys`` table: the operator creates, lists and revokes keys (``dragoman api-key``, through
    the sync bridge); the server finds the key a request presents, by its hash. Without blocking the loop."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def create(
        self,
        name: str,
        *,
        tenant: str | None = None,
        rate_limit_per_minute: int | None = None,
        max_queued_jobs: int | None = None,
        weight: int = 1,
    ) -> tuple[ApiKey, str]:
        """Create a key; return it and the secret key string (shown once, never stored).

        ``tenant`` defaults to ``name``: a key of its own tenant. Give several keys the same
        tenant to rotate one (create the new key, move the callers, revoke the old one).
        ``weight``: the tenant's share of each lane against other tenants' (its staged jobs move
        N entries per turn; keys of one tenant with different weights: the last one used wins).
        """
        tenant = validate_tenant(tenant if tenant is not None else name)
        if not name.strip():
            raise ValueError("an API key needs a non-empty name")
        if rate_limit_per_minute is not None and rate_limit_per_minute <= 0:
            raise ValueError("rate_limit_per_minute must be positive")
        if max_queued_jobs is not None and max_queued_jobs <= 0:
            raise ValueError("max_queued_jobs must be positive")
        if weight <= 0:
            raise ValueError("weight must be a positive whole number (1: an equal share of each lane)")
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        row = await self._one(
            "INSERT INTO api_keys (id, name, tenant, key_hash, prefix, rate_limit_per_minute, max_queued_jobs, weight) "
            f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
            (
                str(uuid.uuid4()),
                name,
                tenant,
                hash_api_key(secret),
                secret[:12],
                rate_limit_per_minute,
                max_queued_jobs,
                weight,
            ),
        )
        assert row is not None  # INSERT ... RETURNING returns the row it inserted
        return _row(row), secret

    async def list(self, *, include_revoked: bool = False) -> list[ApiKey]:
        """Every key (the active ones unless ``include_revoked``), oldest first."""
        where = "" if include_revoked else " WHERE revoked_at IS NULL"
        async with self._pool.connection() as conn:
            cursor = await conn.execute(f"SELECT {_COLUMNS} FROM api_keys{where} ORDER BY created_at, id")
            rows = await cursor.fetchall()
        return [_row(row) for row in rows]

    async def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key by id (its requests are refused from now on); raises if there is no such active key."""
        canonical = canonical_uuid(key_id)
        if canonical is None:
            raise ApiKeyNotFoundError(f"{key_id!r} is not an API key id (ids are UUIDs; see `dragoman api-key list`)")
        row = await self._one(
            f"UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL RETURNING {_COLUMNS}",
            (canonical,),
        )
        if row is None:
            raise ApiKeyNotFoundError(f"no active API key with id {canonical} (see `dragoman api-key list`)")
        return _row(row)

    async def find(self, key: str) -> ApiKey | None:
        """The active key whose hash matches ``key``, or ``None`` (unknown or revoked)."""
        row = await self._one(
            f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL", (hash_api_key(key),)
        )
        return None if row is None else _row(row)

    async def _one(self, query: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(query, params)
            return await cursor.fetchone()
