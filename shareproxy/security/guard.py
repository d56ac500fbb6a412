"""The proxy's security state: users and ACLs cached from the store (reloaded every couple of
seconds, and at once after a change made here), and the one place decisions are taken, counted
and audited."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shareproxy.core import acl
from shareproxy.core.acl import AclBinding, AclFilter, Operation, ResourceType
from shareproxy.security.credentials import ScramCredential
from shareproxy.telemetry import metrics

if TYPE_CHECKING:  # the store (SQLAlchemy) is the server's to import, not the Kafka path's
    from shareproxy.security.store import SecurityStore

AUDIT_LOGGER = (
    "shareproxy.audit"  # who did what: refusals, and redrives (runtime/archive/redrive.py)
)
log = logging.getLogger(AUDIT_LOGGER)


class Security:
    def __init__(
        self,
        store: SecurityStore,
        *,
        enabled: bool,
        super_users: frozenset[str] = frozenset(),
        refresh_s: float = 2.0,
    ) -> None:
        self.store = store
        self.enabled = enabled  # off: every operation is allowed (no authorizer, as in Kafka)
        self.super_users = super_users
        self.refresh_s = refresh_s
        self.bindings: list[AclBinding] = []
        self._creds: dict[tuple[str, str], ScramCredential] = {}

    async def load(self) -> None:
        """Users and ACLs read afresh; the node repeats it every ``refresh_s`` (the last known
        rules hold while a reload fails)."""
        creds = await self.store.credentials()
        bindings = await self.store.acls()
        self._creds = {(c.username, c.mechanism): c for c in creds}
        self.bindings = bindings

    # ------------------------------------------------------------------ users
    def credential(self, username: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get((username, mechanism))

    # ------------------------------------------------------------------ decisions
    def allowed(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        audit: bool = True,
    ) -> bool:
        """``audit=False`` for filtering lists (Metadata, ListGroups): hiding what a principal
        may not see is not a refusal."""
        if not self.enabled:
            return True
        decision = acl.authorize(
            self.bindings, principal, host, operation, resource_type, name, self.super_users
        )
        return self._audited(decision, principal, host, operation, resource_type, name, audit)

    def allowed_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """May the principal ``operation`` some resource of the type (an idempotent producer
        needs Write on any topic)?"""
        if not self.enabled:
            return True
        decision = acl.authorize_any(
            self.bindings, principal, host, operation, resource_type, self.super_users
        )
        return self._audited(decision, principal, host, operation, resource_type, "*", True)

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bitfield a describe answers when asked to include authorized operations; with
        authorization off, every operation the resource type has (as Kafka without an
        authorizer)."""
        if not self.enabled:
            return acl.operations_bitfield(acl.SUPPORTED_OPERATIONS.get(resource_type, ()))
        return acl.authorized_operations(
            self.bindings, principal, host, resource_type, name, self.super_users
        )

    def _audited(
        self,
        decision: acl.Decision,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        audit: bool,
    ) -> bool:
        if not decision.allowed and audit:
            metrics.AUTHORIZATION_DENIALS.labels(operation.name, resource_type.name).inc()
            log.warning(
                "authorization denied: %s from %s may not %s %s %r (%s)",
                principal,
                host,
                operation.name,
                resource_type.name,
                name,
                decision.reason,
                extra={
                    "principal": principal,
                    "host": host,
                    "operation": operation.name,
                    "resource_type": resource_type.name,
                    "resource": name,
                },
            )
        return decision.allowed

    def describe(self, f: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings if f.matches(b)]

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        await self.store.create_acls(bindings)
        await self.load()

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        deleted = await self.store.delete_acls(filters)
        await self.load()
        return deleted

    async def put_user(self, creds: list[ScramCredential]) -> bool:
        created = await self.store.put_credentials(creds)
        await self.load()
        return created

    async def delete_user(self, username: str) -> bool:
        gone = await self.store.delete_user(username)
        await self.load()
        return gone


def audit_change(principal: str, host: str, action: str, result: str, **fields: object) -> None:
    """An operator's change of records, kept in the audit log with its outcome ("OK" or the
    refusal's error code), whether it was made or not."""
    log.info(
        "%s by %s from %s: %s",
        action,
        principal,
        host,
        result,
        extra={"principal": principal, "host": host, "action": action, "result": result, **fields},
    )
