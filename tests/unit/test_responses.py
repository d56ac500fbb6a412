"""Responses built for any version: a field a version lacks is dropped, one no version of the
schema has is a mistake."""

import dataclasses
import importlib
import pkgutil
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.describe_cluster.v0 import response as v0
from kio.schema.describe_cluster.v1 import response as v1
from kio.schema.metadata.v11 import response as metadata_v11

from shareproxy.kafka.responses import build, build_loose, declared_fields, error, schema_fields

FIELDS = {
    "throttle_time": timedelta(0),
    "error_code": error(0),
    "error_message": None,
    "cluster_id": "c",
    "controller_id": 1,
    "brokers": (),
    "cluster_authorized_operations": -2147483648,
}


def test_a_field_only_newer_versions_have_is_dropped_for_an_old_version():
    old = build(v0.DescribeClusterResponse, endpoint_type=1, **FIELDS)
    new = build(v1.DescribeClusterResponse, endpoint_type=1, **FIELDS)
    assert not hasattr(old, "endpoint_type")
    assert new.endpoint_type == 1
    assert old.cluster_id == new.cluster_id == "c"


def test_a_misspelt_field_raises_naming_it_and_the_schema():
    with pytest.raises(TypeError, match=r"DescribeClusterResponse.*'endpiont_type'"):
        build(v0.DescribeClusterResponse, endpiont_type=1, **FIELDS)


def test_a_nested_entity_is_checked_against_its_own_siblings():
    broker = {"broker_id": 1, "host": "h", "port": 9092, "rack": None}
    assert build(v0.DescribeClusterBroker, is_fenced=False, **broker).broker_id == 1  # v2 has it
    with pytest.raises(TypeError, match="'fenced'"):
        build(v0.DescribeClusterBroker, fenced=False, **broker)


def test_every_versions_fields_are_known():
    assert "endpoint_type" in schema_fields(v0.DescribeClusterResponse)


def test_a_table_shared_by_several_schemas_builds_loosely():
    built = build_loose(v0.DescribeClusterResponse, {**FIELDS, "session_id": 0})
    assert built.controller_id == 1


def test_a_field_only_older_versions_have_is_dropped_for_a_newer_one():
    """Metadata v8-v10 have cluster_authorized_operations, v11 and the newest do not: neither
    the version asked for nor the newest knowing it, every version is looked at."""
    fields = {"throttle_time": timedelta(0), "brokers": (), "cluster_id": "c", "topics": ()}
    built = build(
        metadata_v11.MetadataResponse,
        controller_id=1,
        cluster_authorized_operations=-2147483648,
        error_code=error(0),
        **fields,
    )
    assert built.controller_id == 1 and not hasattr(built, "cluster_authorized_operations")
    with pytest.raises(TypeError, match="'cluster_authorised_operations'"):
        build(metadata_v11.MetadataResponse, cluster_authorised_operations=0, **fields)


@pytest.mark.parametrize("family", ["metadata", "share_fetch", "describe_cluster"])
def test_fields_read_from_a_schemas_source_are_those_its_dataclasses_have(family):
    """Versions not imported are read from their source: the same fields, ClassVars left out."""
    package = importlib.import_module(f"kio.schema.{family}")
    for info in pkgutil.iter_modules(package.__path__):
        for kind in ("request", "response"):
            module = importlib.import_module(f"kio.schema.{family}.{info.name}.{kind}")
            source = Path(module.__file__ or "").read_text(encoding="utf-8")
            for cls in vars(module).values():
                if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                    if cls.__module__ != module.__name__:
                        continue  # imported from another schema (a header)
                    expected = {f.name for f in dataclasses.fields(cls)}
                    assert declared_fields(source, cls.__name__) == expected, cls
