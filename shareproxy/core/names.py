"""Which names the proxy accepts — group ids, topic names, user names, principals, passwords —
checked once here and used by the Kafka handlers, the REST API and the CLI alike, before a
name reaches the store.

Topic names follow Kafka's own rule (``Topic.validate``: at most 249 of ``[a-zA-Z0-9._-]``, not
``.`` or ``..``). Kafka takes any non-empty group id; the proxy keeps group ids, user names and
principals in columns of 255 characters and Postgres text cannot hold NUL, so those are refused
longer or with a NUL — or, for user names and principals, with any control character. Each
check returns the problem in words, or None.
"""

from __future__ import annotations

import re
import unicodedata

from shareproxy.core.errors import ErrorCode, ShareError

MAX_TOPIC_NAME = 249  # Kafka's limit
MAX_STORED_NAME = 255  # the store's columns for group ids, user names, principals
# Kafka's widths for a partition index and an offset or ms time: the runtime and the store hold
# no more
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


class InvalidName(ValueError):
    """A name the proxy refuses; the message says which and why."""


def shown(value: str, limit: int = 80) -> str:
    """A client-supplied name quoted for a message, cut to ``limit`` characters: an error
    message must fit the response (non-flexible strings hold at most 32767 bytes)."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value)} chars)"


def stored_name_problem(kind: str, name: str, *, controls: bool = True) -> str | None:
    """A name kept in a column of the store, ``kind`` naming it in the message."""
    if not name:
        return f"the {kind} is empty"
    if len(name) > MAX_STORED_NAME:
        return f"the {kind} has {len(name)} characters; at most {MAX_STORED_NAME} are allowed"
    if "\x00" in name:
        return f"the {kind} {shown(name)} contains NUL"
    if controls and any(unicodedata.category(c) == "Cc" for c in name):
        return f"the {kind} {shown(name)} contains a control character"
    return None


def group_id_problem(group_id: str) -> str | None:
    return stored_name_problem("group id", group_id, controls=False)


def topic_name_problem(name: str) -> str | None:
    if not name:
        return "the topic name is empty"
    if len(name) > MAX_TOPIC_NAME:
        return f"the topic name has {len(name)} characters; at most {MAX_TOPIC_NAME} are allowed"
    if name in (".", ".."):
        return f"{shown(name)} is not a topic name"
    if not _TOPIC.fullmatch(name):
        return f"the topic name {shown(name)} may only contain ASCII letters, digits, '.', '_', '-'"
    return None


def subscribed_name_problem(name: str) -> str | None:
    """A name in a share group's subscription. Kafka's coordinator takes any string there (one
    that is no topic name matches no topic; librdkafka sends ``^name$`` patterns); the proxy
    keeps subscriptions in the store, so it refuses only what it cannot keep: a name longer
    than a stored name, or with a NUL."""
    return stored_name_problem("subscribed topic name", name, controls=False) if name else None


def user_name_problem(name: str) -> str | None:
    """SCRAM user names: besides a stored name's rules, no ',' or '=' (SCRAM escapes them and
    clients disagree on how) and no ':' (it separates a principal's type from its name)."""
    problem = stored_name_problem("user name", name, controls=True)
    if problem is None and any(c in name for c in ",=:"):
        problem = f"the user name {shown(name)} contains ',', '=' or ':'"
    return problem


def principal_problem(principal: str) -> str | None:
    problem = stored_name_problem("principal", principal, controls=True)
    if problem is None and ":" not in principal:
        problem = f"the principal {shown(principal)} is not TYPE:NAME (User:alice)"
    return problem


def password_problem(password: str) -> str | None:
    """SCRAM's SASLprep (RFC 4013) prohibits control characters; PLAIN carries the password
    between NULs. Either way a control character cannot be part of a password."""
    if not password:
        return "the password is empty"
    if any(unicodedata.category(c) == "Cc" for c in password):
        return "the password contains a control character"
    return None


def require(problem: str | None) -> None:
    """Raise InvalidName for a problem (for pydantic validators and the CLI)."""
    if problem is not None:
        raise InvalidName(problem)


def require_group_id(group_id: str) -> None:
    """For the Kafka handlers: INVALID_GROUP_ID, as Kafka answers an unusable group id."""
    problem = group_id_problem(group_id)
    if problem is not None:
        raise ShareError(ErrorCode.INVALID_GROUP_ID, problem)


def require_topic_name(name: str) -> None:
    """For lookups by name: INVALID_TOPIC_EXCEPTION, as Kafka answers a name no topic can
    have (it is never sent to the upstream cluster)."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise ShareError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
