"""ACL decisions, exhaustively over a small universe: every single rule against every request,
then every pair of rules (DENY wins), plus the filters of DescribeAcls / DeleteAcls."""

from __future__ import annotations

import itertools

import pytest

from shareproxy.core.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    authorize,
    authorized_operations,
    parse_enum,
)

R, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
OPS = [op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)]
REQUEST_OPS = [op for op in OPS if op != Operation.ALL]
PRINCIPALS = ["User:alice", "User:*", "User:bob"]
HOSTS = ["10.0.0.1", "*"]
PATTERNS = [  # (resource type, pattern, name)
    (R, PatternType.LITERAL, "orders"),
    (R, PatternType.LITERAL, "*"),
    (R, PatternType.PREFIXED, "ord"),
    (G, PatternType.LITERAL, "workers"),
    (G, PatternType.PREFIXED, "work"),
    (G, PatternType.LITERAL, "*"),
    (C, PatternType.LITERAL, CLUSTER_NAME),
]
RESOURCES = [(R, "orders"), (R, "payments"), (G, "workers"), (G, "other"), (C, CLUSTER_NAME)]

IMPLIES_DESCRIBE = {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}


def expected_match(b: AclBinding, principal, host, op, rtype, name) -> bool:
    """The rule's applicability, written from Kafka's documentation rather than the code."""
    if b.principal != "User:*" and b.principal != principal:
        return False
    if b.host != "*" and b.host != host:
        return False
    if b.resource_type != rtype:
        return False
    if b.pattern_type == PatternType.LITERAL and b.resource_name not in ("*", name):
        return False
    if b.pattern_type == PatternType.PREFIXED and not name.startswith(b.resource_name):
        return False
    if b.operation == Operation.ALL or b.operation == op:
        return True
    if b.permission == Permission.ALLOW:
        if op == Operation.DESCRIBE and b.operation in IMPLIES_DESCRIBE:
            return True
        if op == Operation.DESCRIBE_CONFIGS and b.operation == Operation.ALTER_CONFIGS:
            return True
    return False


def all_bindings():
    for principal, host, (rtype, pattern, name), op, perm in itertools.product(
        PRINCIPALS, HOSTS, PATTERNS, OPS, (Permission.ALLOW, Permission.DENY)
    ):
        yield AclBinding(principal, host, rtype, name, pattern, op, perm)


def all_requests():
    yield from itertools.product(
        ["User:alice", "User:bob"], ["10.0.0.1", "10.0.0.2"], REQUEST_OPS, RESOURCES
    )


def test_no_rule_means_denied():
    for principal, host, op, (rtype, name) in all_requests():
        assert not authorize([], principal, host, op, rtype, name).allowed


def test_every_single_rule_against_every_request():
    checked = 0
    for b in all_bindings():
        for principal, host, op, (rtype, name) in all_requests():
            decision = authorize([b], principal, host, op, rtype, name)
            applies = expected_match(b, principal, host, op, rtype, name)
            assert decision.allowed == (applies and b.permission == Permission.ALLOW), (
                b,
                principal,
                host,
                op,
                name,
            )
            checked += 1
    assert checked > 100_000


def test_deny_beats_allow_for_every_pair_of_rules_in_either_order():
    allows = [b for b in all_bindings() if b.permission == Permission.ALLOW][::7]
    denies = [b for b in all_bindings() if b.permission == Permission.DENY][::7]
    for a, d in itertools.product(allows, denies):
        for principal, host, op, (rtype, name) in list(all_requests())[::5]:
            want = expected_match(a, principal, host, op, rtype, name) and not expected_match(
                d, principal, host, op, rtype, name
            )
            for rules in ([a, d], [d, a]):
                assert authorize(rules, principal, host, op, rtype, name).allowed == want


def test_super_users_are_allowed_even_against_a_deny():
    deny_all = AclBinding(
        "User:*", "*", R, "*", PatternType.LITERAL, Operation.ALL, Permission.DENY
    )
    supers = frozenset({"User:admin"})
    assert authorize([deny_all], "User:admin", "h", Operation.READ, R, "t", supers).allowed
    assert not authorize([deny_all], "User:alice", "h", Operation.READ, R, "t", supers).allowed


def test_the_decision_names_the_rule_for_the_audit_log():
    rule = AclBinding(
        "User:alice", "*", G, "work", PatternType.PREFIXED, Operation.READ, Permission.DENY
    )
    d = authorize([rule], "User:alice", "h", Operation.READ, G, "workers")
    assert not d.allowed and "DENY User:alice" in d.reason and "PREFIXED 'work'" in d.reason
    assert authorize([], "User:alice", "h", Operation.READ, G, "x").reason == "no ACL allows it"


def test_a_prefixed_rule_covers_matching_names_only():
    rule = AclBinding(
        "User:alice", "*", G, "team-a.", PatternType.PREFIXED, Operation.READ, Permission.ALLOW
    )
    assert authorize([rule], "User:alice", "h", Operation.READ, G, "team-a.orders").allowed
    assert not authorize([rule], "User:alice", "h", Operation.READ, G, "team-b.orders").allowed
    assert not authorize([rule], "User:alice", "h", Operation.READ, G, "team-a").allowed


@pytest.mark.parametrize(
    "binding, problem",
    [
        (
            ("alice", "*", R, "t", PatternType.LITERAL, Operation.READ, Permission.ALLOW),
            "principal",
        ),
        (("User:a", "", R, "t", PatternType.LITERAL, Operation.READ, Permission.ALLOW), "host"),
        (
            (
                "User:a",
                "*",
                ResourceType.USER,
                "t",
                PatternType.LITERAL,
                Operation.READ,
                Permission.ALLOW,
            ),
            "resource type",
        ),
        (("User:a", "*", R, "t", PatternType.MATCH, Operation.READ, Permission.ALLOW), "pattern"),
        (("User:a", "*", R, "", PatternType.LITERAL, Operation.READ, Permission.ALLOW), "name"),
        (
            ("User:a", "*", C, "x", PatternType.LITERAL, Operation.ALTER, Permission.ALLOW),
            "Cluster",
        ),
        (
            ("User:a", "*", R, "t", PatternType.LITERAL, Operation.ANY, Permission.ALLOW),
            "operation",
        ),
        (
            ("User:a", "*", R, "t", PatternType.LITERAL, Operation.READ, Permission.ANY),
            "permission",
        ),
    ],
)
def test_invalid_rules_are_refused_with_the_reason(binding, problem):
    with pytest.raises(AclError, match=problem):
        AclBinding(*binding).validate()


def test_filters_match_as_describe_and_delete_acls_do():
    rules = list(all_bindings())
    assert [b for b in rules if AclFilter().matches(b)] == rules
    alice_read = AclFilter(principal="User:alice", operation=Operation.READ)
    assert all(
        b.principal == "User:alice" and b.operation == Operation.READ
        for b in rules
        if alice_read.matches(b)
    )
    literal = AclFilter(resource_type=G, resource_name="workers", pattern_type=PatternType.LITERAL)
    assert {(b.pattern_type, b.resource_name) for b in rules if literal.matches(b)} == {
        (PatternType.LITERAL, "workers")
    }
    match = AclFilter(resource_type=G, resource_name="workers", pattern_type=PatternType.MATCH)
    assert {(b.pattern_type, b.resource_name) for b in rules if match.matches(b)} == {
        (PatternType.LITERAL, "workers"),
        (PatternType.LITERAL, "*"),
        (PatternType.PREFIXED, "work"),
    }


def test_enums_parse_from_the_names_tools_use():
    assert parse_enum(Operation, "DescribeConfigs") == Operation.DESCRIBE_CONFIGS
    assert parse_enum(Operation, "read") == Operation.READ
    assert parse_enum(PatternType, "prefixed") == PatternType.PREFIXED
    with pytest.raises(AclError, match="not one of"):
        parse_enum(Permission, "maybe")


def test_authorized_operations_are_the_bits_of_the_allowed_supported_operations():
    """Kafka's bitfield for describes: bit n for operation code n, over the operations the
    resource type supports, implications included (Read implies Describe)."""
    read = AclBinding(
        "User:alice", "*", R, "orders", PatternType.LITERAL, Operation.READ, Permission.ALLOW
    )
    deny_describe = AclBinding(
        "User:alice", "*", R, "orders", PatternType.LITERAL, Operation.DESCRIBE, Permission.DENY
    )
    ops = authorized_operations([read], "User:alice", "10.0.0.1", R, "orders")
    assert ops == (1 << Operation.READ) | (1 << Operation.DESCRIBE)
    assert authorized_operations([read, deny_describe], "User:alice", "h", R, "orders") == (
        1 << Operation.READ
    )
    assert authorized_operations([read], "User:bob", "h", R, "orders") == 0
    everything = AclBinding(
        "User:*", "*", C, CLUSTER_NAME, PatternType.LITERAL, Operation.ALL, Permission.ALLOW
    )
    cluster = authorized_operations([everything], "User:bob", "h", C, CLUSTER_NAME)
    assert cluster == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # never ALL (2) itself
