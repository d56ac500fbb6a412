"""The proxy's Kafka listener answered with real encoded requests (kio types), version by
version: what ApiVersions advertises is what is served."""

from __future__ import annotations

import socket
import struct

import pytest
from kio.index import load_request_schema, load_response_schema

from shareproxy.broker.dispatch import SERVED
from shareproxy.protocol.codec import decode_response, encode_request


def call(port: int, body, correlation_id: int = 7):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(encode_request(correlation_id, "protocol-test", body))
        size = struct.unpack(">i", _read(s, 4))[0]
        frame = _read(s, size)
    cid, response = decode_response(frame, load_response_schema(body.__api_key__, body.__version__))
    assert cid == correlation_id
    return response


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the proxy")
        out += chunk
    return out


@pytest.fixture(scope="module")
def running(broker, postgres):
    """One proxy for the module: these tests only read."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.proxy import ProxyProcess

    name = "protocol-topic"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(name, 2, 1)]).values():
        f.result(30)
    p = ProxyProcess(
        broker.bootstrap, postgres.create_database("protocol", template="template_migrated")
    )
    p.start()
    yield p, name
    p.stop()
    assert " ERROR " not in p.log(), p.log()


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_lists_exactly_what_is_served(running, version):
    p, _ = running
    cls = load_request_schema(18, version)
    kwargs = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    response = call(p.port, cls(**kwargs))
    assert response.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SERVED


@pytest.mark.parametrize("version", range(4, 14))
def test_metadata_names_the_proxy_as_leader_with_upstream_topic_ids(running, version):
    p, name = running
    cls = load_request_schema(3, version)
    m = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    fields = {"name": name}
    if version >= 10:
        fields["topic_id"] = None
    kwargs = {"topics": (m.MetadataRequestTopic(**fields),), "allow_auto_topic_creation": False}
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = False
    if 8 <= version <= 10:
        kwargs["include_cluster_authorized_operations"] = False
    response = call(p.port, cls(**kwargs))
    assert [(b.node_id, b.port) for b in response.brokers] == [(1, p.port)]
    [t] = response.topics
    assert t.name == name and t.error_code == 0
    assert sorted(x.partition_index for x in t.partitions) == [0, 1]
    assert {x.leader_id for x in t.partitions} == {1}
    if version >= 10:
        assert t.topic_id is not None


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_points_groups_at_the_proxy(running, version):
    p, _ = running
    cls = load_request_schema(10, version)
    if version >= 4:
        response = call(p.port, cls(key_type=0, coordinator_keys=("g1", "g2")))
        assert [(c.key, c.node_id, c.port, c.error_code) for c in response.coordinators] == [
            ("g1", 1, p.port, 0),
            ("g2", 1, p.port, 0),
        ]
        txn = call(p.port, cls(key_type=1, coordinator_keys=("tx",)))
        assert txn.coordinators[0].error_code == 15
    else:
        kwargs = {"key": "g1"} | ({"key_type": 0} if version >= 1 else {})
        response = call(p.port, cls(**kwargs))
        assert (response.error_code, response.node_id, response.port) == (0, 1, p.port)


def test_an_unserved_version_closes_the_connection_and_api_versions_says_why(running):
    p, _ = running
    with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
        # Metadata v0 is not served: the connection is closed, as a Kafka broker does
        s.sendall(encode_request(1, "t", load_request_schema(3, 0)(topics=())))
        assert s.recv(10) == b""
    # an ApiVersions version from the future gets UNSUPPORTED_VERSION with our versions (v0)
    header = struct.pack(">hhih", 18, 99, 5, 1) + b"t"
    with socket.create_connection(("127.0.0.1", p.port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(header)) + header)
        size = struct.unpack(">i", _read(s, 4))[0]
        frame = _read(s, size)
    cid, response = decode_response(frame, load_response_schema(18, 0))
    assert (cid, response.error_code) == (5, 35)
    assert {k.api_key for k in response.api_keys} == set(SERVED)
