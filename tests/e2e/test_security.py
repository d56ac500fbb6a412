"""Security with real librdkafka clients: SASL SCRAM and TLS (client certificates) against the
proxy, ACL grants taking effect live, the admin API's 401/403, the audit log, and the proxy
authenticating to a secured upstream. The ACL table row by row is in test_acl_table.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from confluent_kafka import KafkaException, ShareConsumer

from shareproxy.core.store import SharePartitionKey
from shareproxy.persistence.engine import create_engine
from shareproxy.persistence.repository import SqlShareStateStore
from tests.support.consumers import wait_for
from tests.support.kafka_client import KafkaConnection
from tests.support.proxy import ProxyProcess
from tests.support.secure import PASSWORDS, Secure


def poll_error(consumer: ShareConsumer, timeout: float = 20) -> str:
    """The first error the consumer reports (as an error message or an exception)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for m in consumer.poll(0.5) or []:
                if m.error() is not None:
                    return m.error().name()
        except KafkaException as e:
            return e.args[0].name()
    return ""


def audit(secure: Secure) -> list[dict]:
    lines = [json.loads(x) for x in secure.proxy.log().splitlines() if x.startswith("{")]
    return [e for e in lines if e["logger"] == "shareproxy.audit" and "principal" in e]


def consume(consumer: ShareConsumer, want: int, timeout: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        try:
            got += [m for m in consumer.poll(0.5) or [] if m.error() is None]
        except KafkaException:
            continue
    return got


def metadata_error(secure: Secure, user: str, topic: str) -> int:
    from kio.schema.metadata.v12 import request as md

    with KafkaConnection(secure.sasl) as k:
        assert k.plain(user, PASSWORDS[user]).error_code == 0
        r = k.call(
            md.MetadataRequest(
                topics=(md.MetadataRequestTopic(topic_id=None, name=topic),),
                include_topic_authorized_operations=False,
            )
        )
        return r.topics[0].error_code.value


@pytest.mark.long
def test_group_then_topic_grants_take_effect_without_reconnecting(secure, topic, produce):
    t = topic(1)
    produce(t, 10, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = secure.consumer("bob", group)
    c.subscribe([t])
    try:
        assert poll_error(c) == "GROUP_AUTHORIZATION_FAILED"
        secure.acl("User:bob", "GROUP", group, "READ")
        assert consume(c, 1, 8) == []  # the group now, but not the topic
        assert metadata_error(secure, "bob", t) == 29  # TOPIC_AUTHORIZATION_FAILED
        secure.acl("User:bob", "TOPIC", t, "READ")
        assert len(consume(c, 10)) == 10  # the same consumer, never reconnected by the test
    finally:
        c.close()
    denials = {
        (e["principal"], e["operation"], e["resource_type"], e["resource"]) for e in audit(secure)
    }
    assert ("User:bob", "DESCRIBE", "GROUP", group) in denials
    assert ("User:bob", "DESCRIBE", "TOPIC", t) in denials


def test_deny_beats_allow_and_a_prefixed_rule_covers_matching_groups_only(secure, topic, produce):
    t = topic(1)
    produce(t, 5, partitions=1)
    prefix = f"team-{uuid.uuid4().hex[:6]}."
    secure.acl("User:alice", "GROUP", prefix, "READ", pattern="PREFIXED")
    secure.acl("User:alice", "TOPIC", t, "READ")
    inside, outside, denied = prefix + "orders", "other-" + prefix + "orders", prefix + "audit"
    secure.acl("User:alice", "GROUP", denied, "READ", deny=True)
    for group, works in ((inside, True), (outside, False), (denied, False)):
        c = secure.consumer("alice", group)
        c.subscribe([t])
        try:
            if works:
                assert len(consume(c, 5)) == 5, group
            else:
                assert poll_error(c) == "GROUP_AUTHORIZATION_FAILED", group
        finally:
            c.close()
    reasons = [e["message"] for e in audit(secure) if e["resource"] == denied]
    assert reasons and "denied by DENY User:alice" in reasons[-1]


@pytest.mark.floors
def test_a_wrong_password_fails_is_counted_and_never_logged(secure, topic):
    t = topic(1)
    wrong = "not-" + PASSWORDS["alice"] + "-at-all"

    def failures() -> float:
        text = httpx.get(f"{secure.proxy.admin_url}/metrics", timeout=10).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("shareproxy_authentication_failures_total{")
        )

    before = failures()
    seen: list[str] = []
    c = secure.consumer(
        "alice", "g-wrong", password=wrong, error_cb=lambda e: seen.append(e.name())
    )
    c.subscribe([t])
    try:
        deadline = time.monotonic() + 20
        while "_AUTHENTICATION" not in seen and time.monotonic() < deadline:
            poll_error(c, 1)
        assert "_AUTHENTICATION" in seen, seen  # librdkafka's name for a failed SASL login
    finally:
        c.close()
    assert failures() > before
    log = secure.proxy.log()
    assert "authentication failed" in log
    for password in (wrong, *PASSWORDS.values()):
        assert password not in log


@pytest.mark.floors
def test_tls_client_certificates_name_the_principal_and_sasl_ssl_works(secure, topic, produce):
    t = topic(1)
    produce(t, 5, partitions=1)
    cert, key = secure.ca.issue("carol", "carol", org="acme")
    principal = "User:CN=carol,O=acme"
    group = f"g-{uuid.uuid4().hex[:6]}"
    tls = {
        "bootstrap.servers": f"127.0.0.1:{secure.ssl}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.ca.ca_file),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
        "group.id": group,
    }
    c = ShareConsumer(tls)
    c.subscribe([t])
    try:
        assert poll_error(c) == "GROUP_AUTHORIZATION_FAILED"
        secure.acl(principal, "GROUP", group, "READ")
        secure.acl(principal, "TOPIC", t, "READ")
        assert len(consume(c, 5)) == 5
    finally:
        c.close()
    assert any(e["principal"] == principal for e in audit(secure))
    # SCRAM inside TLS
    secure.acl("User:alice", "GROUP", group + "-s", "READ")
    secure.acl("User:alice", "TOPIC", t, "READ")
    s = ShareConsumer(
        {
            "bootstrap.servers": f"127.0.0.1:{secure.sasl_ssl}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(secure.ca.ca_file),
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": PASSWORDS["alice"],
            "group.id": group + "-s",
        }
    )
    s.subscribe([t])
    try:
        assert len(consume(s, 5)) == 5
    finally:
        s.close()


@pytest.mark.floors
def test_the_admin_api_answers_401_and_403_and_changes_nothing(secure):
    rule = {
        "principal": "User:bob",
        "resource_type": "CLUSTER",
        "resource_name": "kafka-cluster",
        "operation": "ALTER",
    }
    with secure.http() as admin:
        acls_before = admin.get("/v1/acls").json()
        users_before = admin.get("/v1/users").json()
    with secure.http(user=None) as anonymous:
        r = anonymous.post("/v1/acls", json=[rule])
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic")
        assert anonymous.get("/v1/share-groups").status_code == 401
        assert (
            anonymous.get("/v1/acls", headers={"Authorization": "Bearer nope"}).status_code == 401
        )
    with secure.http("alice", "wrong-password") as wrong:
        assert wrong.post("/v1/users", json={"name": "mallory", "password": "x"}).status_code == 401
    with secure.http("bob") as bob:
        r = bob.post("/v1/acls", json=[rule])
        assert r.status_code == 403 and r.json()["error_code"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert bob.delete("/v1/users/alice").status_code == 403
        assert bob.delete("/v1/share-groups/anything").status_code == 403
        token = bob.post("/v1/tokens").json()["token"]
    with secure.http(user=None) as by_token:
        r = by_token.get("/v1/acls", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 403  # authenticated as bob, who may not Describe the cluster
    with secure.http() as admin:
        assert admin.get("/v1/acls").json() == acls_before
        assert admin.get("/v1/users").json() == users_before


async def _leave_state_of_a_deleted_topic(state_url: str, group: str) -> None:
    """A share-partition stored under a topic id the cluster does not have, as a topic deleted
    upstream leaves it."""
    engine = create_engine(state_url)
    try:
        key = SharePartitionKey(group, uuid.uuid4(), 0)
        await SqlShareStateStore(engine).reset(key, 3, "deleted-topic")
    finally:
        await engine.dispose()


def test_a_rest_reset_asks_for_the_topics_it_moves_not_a_deleted_ones_id(secure, topic, produce):
    """State kept for a topic deleted upstream is not reset, so the reset needs no ACL for it
    (its id is no topic name); a caller who may read the group and its live topics resets
    them, one who may not read a live topic is refused."""
    kept = topic(1)
    produce(kept, 5, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    secure.acl("User:bob", "GROUP", group, "READ")
    secure.acl("User:bob", "TOPIC", kept, "READ")
    c = secure.consumer("bob", group)
    c.subscribe([kept])
    try:
        assert len(consume(c, 5)) == 5
    finally:
        c.close()
    asyncio.run(_leave_state_of_a_deleted_topic(secure.proxy.state_url, group))
    reset = f"/v1/share-groups/{group}/offsets/reset"
    with secure.http("bob") as bob:
        wait_for(lambda: bob.get(f"/v1/share-groups/{group}").json()["state"] == "Empty")
        r = bob.post(reset, json={"to": "earliest"})
        assert r.status_code == 200, r.text
        steps = r.json()["partitions"]
        assert [(s["topic"], s["partition"], s["new_start_offset"]) for s in steps] == [
            (kept, 0, 0)
        ]
    secure.acl("User:alice", "GROUP", group, "READ")
    with secure.http("alice") as alice:
        refused = alice.post(reset, json={"to": "earliest"})
        assert refused.status_code == 403
        assert refused.json()["error_code"] == "TOPIC_AUTHORIZATION_FAILED"


@pytest.mark.long
def test_users_and_acls_from_the_cli(secure):
    env = {
        **os.environ,
        "SHAREPROXY_ADMIN_URL": secure.proxy.admin_url,
        "SHAREPROXY_ADMIN_USER": "admin",
        "SHAREPROXY_ADMIN_PASSWORD": PASSWORDS["admin"],
    }

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "shareproxy.cli", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
        )

    name = f"dave{uuid.uuid4().hex[:4]}"
    assert cli("users", "add", name, "--password-stdin", stdin="dave-pw\n").returncode == 0
    listed = json.loads(cli("users", "list", "-o", "json").stdout)
    assert {"name": name, "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]} in listed
    added = cli(
        "acls",
        "add",
        "--principal",
        f"User:{name}",
        "--group",
        "g-cli",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "-o",
        "json",
    )
    assert added.returncode == 0, added.stderr
    shown = json.loads(cli("acls", "list", "--principal", f"User:{name}", "-o", "json").stdout)
    assert {a["operation"] for a in shown} == {"READ", "DESCRIBE"}
    bad = cli("acls", "add", "--principal", name, "--group", "g", "--operation", "Read")
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stderr
    gone = cli("acls", "remove", "--principal", f"User:{name}", "-o", "json")
    assert len(json.loads(gone.stdout)) == 2
    assert cli("users", "remove", name).returncode == 0
    assert cli("users", "remove", name).returncode == 1


def relay(secure: Secure, postgres, password: str) -> ProxyProcess:
    """A second proxy whose upstream cluster is the first proxy's SASL_SSL listener: the
    proxy's own SCRAM and TLS client settings, against a server that checks both."""
    url = postgres.create_database(f"relay{uuid.uuid4().hex[:6]}", template="template_migrated")
    return ProxyProcess(
        f"127.0.0.1:{secure.sasl_ssl}",
        url,
        auto_offset_reset="earliest",
        upstream_security_protocol="SASL_SSL",
        upstream_sasl_mechanism="SCRAM-SHA-512",
        upstream_sasl_username="relay",
        upstream_ssl_cafile=secure.ca.ca_file,
    )


@pytest.mark.floors
def test_the_proxy_authenticates_to_a_secured_upstream(secure, postgres, topic, produce):
    password = "relay-Secret-4"
    with secure.http() as h:
        r = h.post("/v1/users", json={"name": "relay", "password": password})
        assert r.status_code == 201, r.text
    t = topic(2)
    produce(t, 40, partitions=2)
    secure.acl("User:relay", "TOPIC", t, "READ")
    chained = relay(secure, postgres, password)
    chained.start(env={"SHAREPROXY_UPSTREAM_SASL_PASSWORD": password})
    try:
        c = ShareConsumer({"bootstrap.servers": chained.bootstrap, "group.id": "g-relay"})
        c.subscribe([t])
        try:
            got = consume(c, 40)
        finally:
            c.close()
        assert sorted((m.partition(), m.offset()) for m in got) == [
            (p, o) for p in range(2) for o in range(20)
        ]
    finally:
        chained.stop()
    # the first proxy saw the relay's connections as User:relay, over the SASL_SSL listener
    text = httpx.get(f"{secure.proxy.admin_url}/metrics", timeout=10).text
    assert any(
        line.startswith("shareproxy_connections_total{")
        and 'principal="User:relay"' in line
        and 'listener="SASL_SSL"' in line
        for line in text.splitlines()
    ), text
    assert password not in chained.log()


def test_a_wrong_upstream_password_keeps_the_proxy_retrying_and_unlogged(secure, postgres):
    wrong = "relay-Wrong-5"
    chained = relay(secure, postgres, wrong)
    chained.start(wait=False, env={"SHAREPROXY_UPSTREAM_SASL_PASSWORD": wrong})
    try:
        deadline = time.monotonic() + 30
        while "retrying" not in chained.log() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert chained.proc is not None and chained.proc.poll() is None
    finally:
        chained.stop()
    log = chained.log()
    assert "upstream not reachable yet" in log, log
    assert "SaslAuthenticationFailed" in log, log  # the operator sees why
    assert wrong not in log
