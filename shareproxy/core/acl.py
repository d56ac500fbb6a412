"""ACL decisions as Kafka makes them: no I/O, the rules are handed in.

A rule (an ACL binding) allows or denies one principal, from one host, an operation on resources
of one type whose name matches literally or by prefix. DENY beats ALLOW; super users are always
allowed; with no matching ALLOW the answer is no. An ALLOW of Read, Write, Delete or Alter also
allows Describe, and AlterConfigs allows DescribeConfigs (Kafka's implied operations); a DENY
denies only what it names (or All).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from shareproxy.core.names import principal_problem, stored_name_problem

E = TypeVar("E", bound=IntEnum)

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name
# the resource types a rule may name: those the proxy checks
BINDABLE = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)

# An ALLOW of any of these also allows the key.
_IMPLIED_BY = {
    Operation.DESCRIBE: {
        Operation.DESCRIBE,
        Operation.READ,
        Operation.WRITE,
        Operation.DELETE,
        Operation.ALTER,
    },
    Operation.DESCRIBE_CONFIGS: {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},
}


# the schemas' default of every authorized-operations field: not asked for
UNREQUESTED_OPERATIONS = -(2**31)

# Kafka's AclEntry.supportedOperations: the operations an "authorized operations" bitfield
# (Metadata, DescribeCluster, DescribeTopicPartitions, the group describes) speaks of
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        Operation.READ,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}


class AclError(ValueError):
    """A rule or filter that cannot be stored or used (the RPCs answer INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    principal: str  # "User:alice" or "User:*"
    host: str  # an address, or "*"
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    operation: Operation
    permission: Permission  # ALLOW or DENY

    def validate(self) -> AclBinding:
        """The binding itself, or AclError saying what is wrong with it."""
        for problem in (
            principal_problem(self.principal),
            stored_name_problem("host", self.host),
            stored_name_problem("resource name", self.resource_name),
        ):
            if problem is not None:
                raise AclError(problem)
        if not self.principal.startswith("User:") or self.principal == "User:":
            raise AclError(f"principal {self.principal!r} is not User:<name> or User:*")
        if not self.host:
            raise AclError("host must be an address or *")
        if self.resource_type not in BINDABLE:
            raise AclError(
                f"resource type {self.resource_type.name} is not Topic, Group, Cluster "
                "or TransactionalId"
            )
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"pattern type {self.pattern_type.name} is not LITERAL or PREFIXED")
        if not self.resource_name:
            raise AclError("resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and (
            self.resource_name != CLUSTER_NAME or self.pattern_type != PatternType.LITERAL
        ):
            raise AclError(f"the Cluster resource is LITERAL {CLUSTER_NAME!r}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise AclError(f"operation {self.operation.name} cannot be granted or denied")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"permission {self.permission.name} is not ALLOW or DENY")
        return self

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls: None and the ANY values match everything."""

    principal: str | None = None
    host: str | None = None
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.operation != Operation.ANY and self.operation != b.operation:
            return False
        if self.permission != Permission.ANY and self.permission != b.permission:
            return False
        if self.pattern_type == PatternType.MATCH:
            # the bindings that would apply to the named resource
            return self.resource_name is None or b.covers(b.resource_type, self.resource_name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != b.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == b.resource_name


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str  # for the audit log: which rule, or why none applied


def authorize(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
    resource_name: str,
    super_users: frozenset[str] = frozenset(),
) -> Decision:
    """May ``principal`` connecting from ``host`` perform ``operation`` on the resource?"""
    if principal in super_users:
        return Decision(True, "super user")
    allow: AclBinding | None = None
    allowing = _IMPLIED_BY.get(operation, {operation})
    for b in _applying(bindings, principal, host):
        if not b.covers(resource_type, resource_name):
            continue
        if b.permission == Permission.DENY and b.operation in (operation, Operation.ALL):
            return Decision(False, f"denied by {describe(b)}")
        granted = b.operation == Operation.ALL or b.operation in allowing
        if b.permission == Permission.ALLOW and allow is None and granted:
            allow = b
    if allow is not None:
        return Decision(True, f"allowed by {describe(allow)}")
    return Decision(False, "no ACL allows it")


def authorize_any(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
    super_users: frozenset[str] = frozenset(),
) -> Decision:
    """May ``principal`` perform ``operation`` on some resource of the type? (Kafka's
    ``authorizeByResourceType``: an idempotent producer needs Write on any topic.) An ALLOW
    on any resource says yes, unless a DENY covers every resource of the type."""
    if principal in super_users:
        return Decision(True, "super user")
    allow: AclBinding | None = None
    allowing = _IMPLIED_BY.get(operation, {operation})
    for b in _applying(bindings, principal, host):
        if b.resource_type != resource_type:
            continue
        every = (b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD) or (
            b.pattern_type == PatternType.PREFIXED and b.resource_name == ""
        )
        if b.permission == Permission.DENY and every and b.operation in (operation, Operation.ALL):
            return Decision(False, f"denied by {describe(b)}")
        granted = b.operation == Operation.ALL or b.operation in allowing
        if b.permission == Permission.ALLOW and allow is None and granted:
            allow = b
    if allow is not None:
        return Decision(True, f"allowed by {describe(allow)}")
    return Decision(False, f"no ACL allows {operation.name} on any {resource_type.name}")


def operations_bitfield(operations: Iterable[Operation]) -> int:
    """Kafka's wire form of a set of operations: bit ``n`` set for the operation of code ``n``."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


def authorized_operations(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    resource_type: ResourceType,
    resource_name: str,
    super_users: frozenset[str] = frozenset(),
) -> int:
    """The operations on the resource the principal may perform, as Kafka's bitfield."""
    rules = list(bindings)
    return operations_bitfield(
        op
        for op in SUPPORTED_OPERATIONS.get(resource_type, ())
        if authorize(rules, principal, host, op, resource_type, resource_name, super_users).allowed
    )


def _applying(bindings: Iterable[AclBinding], principal: str, host: str) -> Iterable[AclBinding]:
    """The rules that name this principal (or all) from this host (or any)."""
    for b in bindings:
        if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD):
            yield b


def describe(b: AclBinding) -> str:
    return (
        f"{b.permission.name} {b.principal} from {b.host} {b.operation.name} on "
        f"{b.resource_type.name} {b.pattern_type.name} {b.resource_name!r}"
    )


def parse_enum(kind: type[E], text: str) -> E:
    """``"read"``, ``"Read"``, ``"READ"``, ``"describe_configs"``/``"DescribeConfigs"`` → enum."""
    key = "".join(c for c in text if c.isalnum()).upper()
    for member in kind:
        if member.name.replace("_", "") == key:
            return member
    names = ", ".join(m.name for m in kind if m.name not in ("UNKNOWN",))
    raise AclError(f"{text!r} is not one of {names}")
