"""Users (SCRAM credentials), ACL bindings and admin API tokens in the state store.

Security owns this data and its types; only the tables live with the others in
``persistence.tables``, so that one set of migrations creates the whole schema. The proxy keeps
all three in memory and reloads them every couple of seconds, so a change made through any proxy
or the CLI applies everywhere without a restart.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, delete, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from shareproxy.core.acl import AclBinding, AclFilter, Operation, PatternType, Permission
from shareproxy.core.acl import ResourceType as RT
from shareproxy.persistence.boundary import store_boundary
from shareproxy.persistence.engine import aware_utc
from shareproxy.persistence.tables import acls, api_tokens, scram_credentials
from shareproxy.security.credentials import ScramCredential


def _binding(row: Row[Any]) -> AclBinding:
    return AclBinding(
        row.principal,
        row.host,
        RT(row.resource_type),
        row.resource_name,
        PatternType(row.pattern_type),
        Operation(row.operation),
        Permission(row.permission),
    )


def _values(b: AclBinding) -> dict[str, object]:
    return {
        "principal": b.principal,
        "host": b.host,
        "resource_type": int(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": int(b.pattern_type),
        "operation": int(b.operation),
        "permission": int(b.permission),
    }


@store_boundary
class SecurityStore:
    """The users, ACL and token tables, read and written for the security guard and the CLI."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._users_mutex = asyncio.Lock()

    # ------------------------------------------------------------------ users
    async def credentials(self) -> list[ScramCredential]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(scram_credentials))
            return [
                ScramCredential(
                    r.username, r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations
                )
                for r in rows
            ]

    async def put_credentials(self, creds: list[ScramCredential]) -> bool:
        """Create or replace a user's credentials (all mechanisms at once); True if new.
        Writers of one user take turns — in this process by a lock, across processes on
        Postgres by an advisory lock on the name — so concurrent creates create it once."""
        async with self._users_mutex:
            return await self._put_credentials(creds)

    async def _put_credentials(self, creds: list[ScramCredential]) -> bool:
        names = {c.username for c in creds}
        async with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                for name in sorted(names):
                    await conn.execute(
                        text("SELECT pg_advisory_xact_lock(hashtext(:user_name))"),
                        {"user_name": name},
                    )
            existed = (
                await conn.execute(
                    select(scram_credentials.c.username).where(
                        scram_credentials.c.username.in_(names)
                    )
                )
            ).first() is not None
            await conn.execute(
                delete(scram_credentials).where(scram_credentials.c.username.in_(names))
            )
            await conn.execute(
                insert(scram_credentials),
                [
                    {
                        "username": c.username,
                        "mechanism": c.mechanism,
                        "salt": c.salt,
                        "stored_key": c.stored_key,
                        "server_key": c.server_key,
                        "iterations": c.iterations,
                    }
                    for c in creds
                ],
            )
        return not existed

    async def delete_user(self, username: str) -> bool:
        async with self.engine.begin() as conn:
            gone = await conn.execute(
                delete(scram_credentials).where(scram_credentials.c.username == username)
            )
            await conn.execute(delete(api_tokens).where(api_tokens.c.username == username))
        return bool(gone.rowcount)

    # ------------------------------------------------------------------ ACLs
    async def acls(self) -> list[AclBinding]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(acls).order_by(acls.c.id))
            return [_binding(r) for r in rows]

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        """Store each binding once (creating an existing one is not an error, as in Kafka)."""
        async with self.engine.begin() as conn:
            for b in bindings:
                exists = await conn.execute(
                    select(acls.c.id).where(and_(*(acls.c[k] == v for k, v in _values(b).items())))
                )
                if exists.first() is None:
                    try:
                        async with conn.begin_nested():
                            await conn.execute(insert(acls).values(**_values(b)))
                    except IntegrityError:
                        pass  # created concurrently by another writer: stored once all the same

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Delete the bindings each filter matches; per filter, what it deleted."""
        async with self.engine.begin() as conn:
            rows = [(r.id, _binding(r)) for r in await conn.execute(select(acls).with_for_update())]
            per_filter: list[list[AclBinding]] = []
            doomed: set[int] = set()
            for f in filters:
                hit = [(i, b) for i, b in rows if f.matches(b)]
                per_filter.append([b for _, b in hit])
                doomed.update(i for i, _ in hit)
            if doomed:
                await conn.execute(delete(acls).where(acls.c.id.in_(doomed)))
        return per_filter

    # ------------------------------------------------------------------ tokens
    async def add_token(self, token_hash: str, username: str, expires_at: datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(api_tokens).values(
                    token_hash=token_hash, username=username, expires_at=expires_at
                )
            )

    async def token_user(self, token_hash: str, now: datetime) -> str | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(api_tokens.c.username, api_tokens.c.expires_at).where(
                        api_tokens.c.token_hash == token_hash
                    )
                )
            ).first()
        if row is None:
            return None
        expires = aware_utc(row.expires_at)
        return row.username if expires is not None and expires > now else None
