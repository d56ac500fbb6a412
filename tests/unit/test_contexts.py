"""The dispatcher's one BrokerContext has every member each handler family's narrow context
names (mypy checks the types; this checks the names at test time)."""

import dataclasses
import inspect
from typing import Protocol

import pytest

from shareproxy.kafka import contexts
from shareproxy.kafka.context import BrokerContext

FAMILIES = [
    c
    for c in vars(contexts).values()
    if inspect.isclass(c) and issubclass(c, Protocol) and c.__module__ == contexts.__name__
]


def _members(protocol: type) -> set[str]:
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass.__module__ != contexts.__name__:
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= set(getattr(klass, "__annotations__", {}))
    return names


def test_every_family_has_a_context():
    assert len(FAMILIES) >= 7


@pytest.mark.parametrize("family", FAMILIES, ids=lambda c: c.__name__)
def test_the_broker_context_has_what_each_family_names(family):
    has = {f.name for f in dataclasses.fields(BrokerContext)} | set(dir(BrokerContext))
    assert _members(family) <= has, _members(family) - has
