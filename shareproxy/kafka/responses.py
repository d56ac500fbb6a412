"""Building kio responses: one call for every version of a schema, and the envelopes and
entries several handlers share."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import pkgutil
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
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
    if unknown and unknown - _newest_fields(cls):  # most fields are the newest version's
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
    found: set[str] = set()
    for version in _versions(family):
        found |= _sibling_fields(family, version, kind, name)
    return frozenset(found)


def _newest_fields(cls: type) -> frozenset[str]:
    """The fields of ``cls``'s sibling in the newest version of its schema, where the fields
    a handler gives are found most often: the other versions are read only for a field the
    newest version does not have."""
    found = _NEWEST_FIELDS.get(cls)
    if found is None:
        found = _NEWEST_FIELDS[cls] = _newest_sibling_fields(cls)
    return found


_NEWEST_FIELDS: dict[type, frozenset[str]] = {}


def _newest_sibling_fields(cls: type) -> frozenset[str]:
    match = _VERSIONED.fullmatch(cls.__module__)
    if match is None:
        return _fields(cls)
    family, kind = match["family"], match["kind"]
    versions = _versions(family)
    if not versions:
        return _fields(cls)
    return _sibling_fields(family, versions[-1], kind, cls.__qualname__)


@functools.cache
def _versions(family: str) -> tuple[str, ...]:
    """The version packages of a kio schema (``v0``, ``v1``, …), oldest first."""
    package = importlib.import_module(family)
    found = [
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if _VERSION_PACKAGE.fullmatch(info.name)
    ]
    return tuple(sorted(found, key=lambda v: int(v[1:])))


@functools.cache
def _sibling_fields(family: str, version: str, kind: str, name: str) -> frozenset[str]:
    """The fields of the class ``name`` in one version's module, read from its source when it
    is not imported: importing it builds every dataclass in it, and with them its package's
    other module (a Metadata version: ~8 ms; its 13 versions, ~100 ms of a node's first
    Metadata answer), where parsing the source takes a fraction of that."""
    module_name = f"{family}.{version}.{kind}"
    module = sys.modules.get(module_name)
    if module is None:
        for base in importlib.import_module(family).__path__:
            source = Path(base) / version / f"{kind}.py"
            if source.is_file():
                return declared_fields(source.read_text(encoding="utf-8"), name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            return frozenset()
    sibling = getattr(module, name, None)
    if isinstance(sibling, type) and dataclasses.is_dataclass(sibling):
        return _fields(sibling)
    return frozenset()


def declared_fields(source: str, name: str) -> frozenset[str]:
    """The dataclass fields the class ``name`` declares at the top level of ``source``: its
    annotated names but the ClassVars, as ``dataclasses.fields`` lists them."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return frozenset(
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and not _is_class_var(stmt.annotation)
            )
    return frozenset()


def _is_class_var(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    return (isinstance(annotation, ast.Name) and annotation.id == "ClassVar") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "ClassVar"
    )


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
    "declared_fields",
    "error",
    "node_endpoints",
    "schema_fields",
    "schema_module",
]
