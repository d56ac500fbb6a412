"""Building kio responses: one call for every version of a schema, and the envelopes and
entries several handlers share."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
import re
import sys
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, TypeAlias, TypeVar

from kio.schema.errors import ErrorCode as KioErrorCode

T = TypeVar("T")

# A kio entity (a response, or an entry of one) of whichever API and version a request named:
# kio's generated classes share no base class, so this names what a value is, not its type.
KioEntity: TypeAlias = Any


# kio's module of one version of an API's schema: kio.schema.<api>.v<N>.request|response
_VERSIONED = re.compile(r"(?P<family>.+)\.v\d+\.(?P<kind>[a-z_]+)")
_VERSION_PACKAGE = re.compile(r"v\d+")


def build(cls: type[T], **fields: Any) -> T:
    """Construct a kio entity of any version from the fields that version has: one call
    answers every version. A field no version of the schema has is a mistake (a misspelt
    name would vanish from the answer), so it raises TypeError."""
    names = _fields(cls)
    unknown = fields.keys() - names
    if unknown:
        strange = sorted(unknown - schema_fields(cls))
        if strange:
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} has no field {strange[0]!r} "
                "in any version of its schema"
            )
    return cls(**{k: v for k, v in fields.items() if k in names})


def build_loose(cls: type[T], fields: Mapping[str, Any]) -> T:
    """``build`` from a table of values meant for the entities of several schemas (one
    refusal shape for Produce, Fetch, ListOffsets…): what this schema never has is left out."""
    names = _fields(cls)  # what ``build`` would keep of the fields the schema knows
    return cls(**{k: v for k, v in fields.items() if k in names})


_FIELDS: dict[type, frozenset[str]] = {}


def _fields(cls: type) -> frozenset[str]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return found


def schema_fields(cls: type) -> frozenset[str]:
    """Every field name ``cls`` has in any version of its schema (its siblings: the class of
    the same name in kio's module of each other version); for a class outside kio's
    versioned modules, its own fields."""
    found = _SCHEMA_FIELDS.get(cls)
    if found is None:
        found = _SCHEMA_FIELDS[cls] = _schema_fields(cls)
    return found


_SCHEMA_FIELDS: dict[type, frozenset[str]] = {}


def _schema_fields(cls: type) -> frozenset[str]:
    match = _VERSIONED.fullmatch(cls.__module__)
    if match is None:
        return _fields(cls)
    return _family_fields(match["family"], match["kind"], cls.__qualname__) | _fields(cls)


@functools.cache
def _family_fields(family: str, kind: str, name: str) -> frozenset[str]:
    package = importlib.import_module(family)
    found: set[str] = set()
    for info in pkgutil.iter_modules(package.__path__):
        if not _VERSION_PACKAGE.fullmatch(info.name):
            continue
        try:
            module = importlib.import_module(f"{family}.{info.name}.{kind}")
        except ModuleNotFoundError:
            continue
        sibling = getattr(module, name, None)
        if isinstance(sibling, type) and dataclasses.is_dataclass(sibling):
            found |= _fields(sibling)
    return frozenset(found)


def schema_module(cls: type) -> ModuleType:
    """The kio module holding ``cls`` and its nested entity types (same API version)."""
    return sys.modules[cls.__module__]


def node_endpoints(cls: type[T], endpoints: Iterable[tuple[int, str, int]]) -> tuple[T, ...]:
    """KIP-951's NodeEndpoints entries from (node id, host, port)."""
    return tuple(
        build(cls, node_id=node_id, host=host, port=port, rack=None)
        for node_id, host, port in endpoints
    )


def error(code: int) -> KioErrorCode:
    return KioErrorCode(int(code))


__all__ = [
    "KioEntity",
    "build",
    "build_loose",
    "error",
    "node_endpoints",
    "schema_fields",
    "schema_module",
]
