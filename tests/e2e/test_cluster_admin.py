"""The admin API and the CLI against any node of a cluster: a call about a group that another
node coordinates is passed on to it, so every node gives the coordinator's answer; the caller is
checked where it arrived before anything is passed on; a coordinator that cannot be reached is
a 503 until its lease passes and another node takes the group over. One cluster of three nodes
(then two, once the coordinator of a group is killed, then one) serves the whole module."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from typer.testing import CliRunner

from shareproxy.admin.forwarding import FORWARDED_HEADER
from shareproxy.cli.admin_client import seg
from shareproxy.cli.app import app
from shareproxy.core import group_config as gc
from tests.support.cluster import LEASE_MS, owned, wait_for_agreement, wait_for_view
from tests.support.consumers import wait_for
from tests.support.dead_letters import new_topic
from tests.support.group_configs import alter_group_configs
from tests.support.proxy import ProxyProcess
from tests.support.secure import PASSWORDS, add_user
from tests.support.topics import create_topic, produce

ADMIN = ("admin", PASSWORDS["admin"])
ALICE = ("alice", PASSWORDS["alice"])  # a user with no ACLs


@pytest.fixture(scope="module")
def nodes(broker, postgres) -> Iterator[list[ProxyProcess]]:
    url = postgres.create_database(f"fleet_{uuid.uuid4().hex[:8]}", "template_migrated")
    for name in ("admin", "alice"):
        add_user(url, name, PASSWORDS[name])
    started = [
        ProxyProcess(
            broker.bootstrap,
            url,
            node_id=i,
            node_lease_ms=LEASE_MS,
            auto_offset_reset="earliest",
            authorization="on",
            super_users="User:admin",
        )
        for i in (1, 2, 3)
    ]
    try:
        for node in started:
            node.start()
        # Kafka clients on the PLAINTEXT listener are anonymous: let them consume
        grant = [
            {"principal": "User:ANONYMOUS", "resource_type": kind, "resource_name": "*",
             "operation": "All"}
            for kind in ("Group", "Topic")
        ]  # fmt: skip
        for node in started:  # on each: in force there at once, not at its next reload
            made = httpx.post(f"{node.admin_url}/v1/acls", json=grant, auth=ADMIN, timeout=10)
            assert made.status_code == 201, made.text
        yield started
    finally:
        for node in started:
            node.stop()
    for node in started:  # an outage of another node is a warning, never an error
        assert "Traceback" not in node.log(), node.log_path
        assert " ERROR " not in node.log(), node.log_path


def _member(
    nodes: list[ProxyProcess], topic: str, group: str = ""
) -> tuple[ShareConsumer, str, ProxyProcess]:
    """A share group with one member, and the node that coordinates it, once the nodes agree
    which one that is."""
    wait_for_agreement(nodes)
    group = group or f"g-{uuid.uuid4().hex[:6]}"
    c = ShareConsumer({"bootstrap.servers": nodes[0].bootstrap, "group.id": group})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not any(group in owned(n)["groups_coordinated"] for n in nodes):
            c.poll(0.5)
            assert time.monotonic() < deadline, "the group never joined"
    except BaseException:
        c.close()
        raise
    home = next(n for n in nodes if group in owned(n)["groups_coordinated"])
    return c, group, home


def _rest(node: ProxyProcess, method: str, path: str, auth=ADMIN, **kw) -> httpx.Response:
    return httpx.request(method, node.admin_url + path, auth=auth, timeout=30, **kw)


def _cli(node: ProxyProcess, *args: str) -> tuple[int, str]:
    env = {"SHAREPROXY_ADMIN_USER": ADMIN[0], "SHAREPROXY_ADMIN_PASSWORD": ADMIN[1]}
    done = CliRunner().invoke(app, ["groups", *args, "--admin-url", node.admin_url], env=env)
    return done.exit_code, done.output


def _everywhere(nodes: list[ProxyProcess], ask) -> object:
    """The one answer every node gives (tried again for a few seconds while a member's
    assignment settles); the answers if they never agree."""
    deadline = time.monotonic() + 15
    while True:
        answers = [ask(n) for n in nodes]
        if all(a == answers[0] for a in answers):
            return answers[0]
        assert time.monotonic() < deadline, answers
        time.sleep(0.5)


def _spread_topic(nodes: list[ProxyProcess], broker) -> tuple[str, dict[int, int]]:
    """A six-partition topic led by every node (placement is by topic id), and its leaders."""
    for _ in range(20):
        topic = create_topic(broker.bootstrap, 6)
        leaders = wait_for_view(nodes, topic)
        if len(set(leaders.values())) == len(nodes):
            return topic, leaders
    raise AssertionError("no topic spread over every node in 20 tries")


def _accept(node: ProxyProcess, group: str, consumer_id: str, records: list[dict]) -> list:
    """The HTTP records API's acknowledgement of ``records``, through ``node``: its results."""
    acks = [
        {"topic": r["topic"], "partition": r["partition"], "first_offset": r["offset"],
         "last_offset": r["offset"], "type": "accept"}
        for r in records
    ]  # fmt: skip
    body = {"consumer_id": consumer_id, "acknowledgements": acks}
    done = _rest(node, "POST", f"/v1/share-groups/{group}/records/acknowledge", json=body)
    assert done.status_code == 200, done.text
    return done.json()["results"]


def _reads(group: str, topic: str) -> list:
    """Every REST read of one group, as (status, body), and every CLI read, as (exit, text)."""
    base = f"/v1/share-groups/{seg(group)}"
    return [
        lambda n: (lambda r: (r.status_code, r.json()))(_rest(n, "GET", base)),
        lambda n: (lambda r: (r.status_code, r.json()))(_rest(n, "GET", f"{base}/offsets")),
        lambda n: (lambda r: (r.status_code, r.json()))(_rest(n, "GET", f"{base}/config")),
        # what each node's dead-letter writer holds, joined from every node
        lambda n: (lambda r: (r.status_code, r.json()))(_rest(n, "GET", f"{base}/dead-letters")),
        lambda n: (lambda r: (r.status_code, r.json()))(_rest(n, "GET", f"{base}/archived")),
        lambda n: _cli(n, "describe", group, "-o", "json"),
        lambda n: _cli(n, "offsets", group, "-o", "json"),
        lambda n: _cli(n, "config", group, "-o", "json"),
        lambda n: _cli(n, "list", "-o", "json"),
        # a dry run changes nothing: the coordinator's plan from every node
        lambda n: _cli(n, "reset-offsets", group, "--to-latest", "-o", "json"),
    ]


@pytest.mark.long
def test_every_group_route_and_command_answers_alike_from_every_node(nodes, broker):
    """For a group id as Kafka allows it ('/', '?', '#', '%' and a space in it too): encoded in
    the path, routed whole, and passed on to the coordinator as the client sent it."""
    topic = create_topic(broker.bootstrap, 3)
    c, group, home = _member(nodes, topic, f"team/g-{uuid.uuid4().hex[:6]}?v=1 #100%")
    others = [n for n in nodes if n is not home]
    base = f"/v1/share-groups/{seg(group)}"
    try:
        for ask in _reads(group, topic):
            _everywhere(nodes, ask)
        described = _rest(others[0], "GET", base)
        assert described.status_code == 200 and len(described.json()["members"]) == 1
        # what the coordinator refuses while the group has a member, it refuses from anywhere
        for node in others:
            gone = _rest(node, "DELETE", base)
            assert gone.status_code == 409, gone.text
            assert gone.json()["error_code"] == "NON_EMPTY_GROUP"
            subscribed = _rest(node, "DELETE", f"{base}/offsets", params={"topic": topic})
            assert subscribed.status_code == 409, subscribed.text
            assert _cli(node, "delete", group) == _cli(home, "delete", group)
            assert _cli(node, "delete", group)[0] == 1
            assert _cli(node, "delete-offsets", group, "--topic", topic)[0] == 1
        # a config changed through a node that does not coordinate the group
        changed = _cli(others[0], "config", group, "--set", "share.record.lock.duration.ms=20000")
        assert changed[0] == 0, changed[1]
        entry = _rest(others[1], "GET", f"{base}/config").json()["configs"]
        assert entry["share.record.lock.duration.ms"]["value"] == "20000"
    finally:
        c.close()
    _everywhere(nodes, lambda n: _rest(n, "GET", base).json()["state"])
    # empty now: changes through a node that does not coordinate it, answered by the one that does
    reset = _rest(
        others[0], "POST", f"{base}/offsets/reset", json={"to": "latest", "dry_run": False}
    )
    assert reset.status_code == 200 and reset.json()["dry_run"] is False, reset.text
    assert _cli(others[1], "delete-offsets", group, "--topic", topic)[0] == 0
    assert _rest(others[0], "DELETE", base).status_code == 204
    assert _everywhere(nodes, lambda n: _rest(n, "GET", base).status_code) == 404
    assert _everywhere(nodes, lambda n: _cli(n, "describe", group))[0] == 1


@pytest.mark.floors
def test_a_caller_is_checked_where_it_arrives_and_a_call_is_passed_on_once(nodes, broker):
    topic = create_topic(broker.bootstrap, 1)
    c, group, home = _member(nodes, topic)
    c.close()
    base = f"/v1/share-groups/{group}"
    for node in nodes:
        refused = _rest(node, "GET", base, auth=ALICE)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error_code"] == "GROUP_AUTHORIZATION_FAILED"
        assert _rest(node, "GET", base, auth=("alice", "wrong")).status_code == 401
        assert _rest(node, "GET", base, auth=None).status_code == 401
    # a call another node passed on, landing on a node that does not coordinate the group
    for node in (n for n in nodes if n is not home):
        looped = _rest(node, "GET", base, headers={FORWARDED_HEADER: "1"})
        assert looped.status_code == 421, looped.text
        assert looped.json()["error_code"] == "NOT_COORDINATOR"
        assert f"proxy node {home.options['node_id']}" in looped.json()["message"]
        assert f"admin API {home.admin_url}" in looped.json()["message"]


def test_the_group_list_sums_up_a_group_alike_from_every_node(nodes, broker):
    """Members and subscriptions from the group's coordinator, lag and the age of the oldest
    record not yet acknowledged from the same durable state and log, whichever node is asked."""
    topic = create_topic(broker.bootstrap, 1)
    c, group, home = _member(nodes, topic)
    try:
        produce(broker.bootstrap, topic, 8, partitions=1)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 8:  # implicit mode: held unacknowledged while not polled again
            got += [m for m in c.poll(0.5) or [] if m.error() is None]
            assert time.monotonic() < deadline, len(got)

        def summary(n: ProxyProcess) -> dict:
            listed = _rest(n, "GET", "/v1/share-groups").json()
            return next(g for g in listed if g["group_id"] == group)

        seen = [summary(n) for n in nodes]
        assert all(s["oldest_unacked_age_seconds"] > 0 for s in seen), json.dumps(seen)
        ages = [s.pop("oldest_unacked_age_seconds") for s in seen]
        assert max(ages) - min(ages) < 5, ages
        assert seen == [
            {"group_id": group, "state": "Stable", "members": 1, "topics": [topic], "lag": 8}
        ] * len(nodes)
        code, text = _cli(next(n for n in nodes if n is not home), "list", "-o", "json")
        assert code == 0 and next(g for g in json.loads(text) if g["group_id"] == group)["lag"] == 8
        c.commit_sync()  # the 8 acknowledged: nothing waits, from anywhere
        settled = _everywhere(
            nodes, lambda n: {k: summary(n)[k] for k in ("lag", "oldest_unacked_age_seconds")}
        )
        assert settled == {"lag": 0, "oldest_unacked_age_seconds": 0}
    finally:
        c.close()


def test_dead_letters_waiting_on_any_node_are_seen_from_every_node(nodes, broker):
    """Each node's dead-letter writer holds the share-partitions it leads; the view joins
    them, so records rejected on three partitions show up whole from any node."""
    topic = create_topic(broker.bootstrap, 3)
    dlq = f"dlq.{uuid.uuid4().hex[:8]}"  # missing: the rejected records wait for it
    produce(broker.bootstrap, topic, 9, partitions=3)
    group = f"g-{uuid.uuid4().hex[:6]}"
    alter_group_configs(nodes[0], group, {gc.DLQ_TOPIC: dlq})
    c = ShareConsumer(
        {
            "bootstrap.servers": nodes[0].bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe([topic])
    try:
        rejected = 0
        deadline = time.monotonic() + 60
        while rejected < 9:  # explicit mode: each poll's records acknowledged before the next
            assert time.monotonic() < deadline, rejected
            for m in c.poll(0.5) or []:
                assert m.error() is None, m.error()
                c.acknowledge(m, AcknowledgeType.REJECT)
                rejected += 1
        c.commit_sync()
    finally:
        c.close()

    def waiting(n: ProxyProcess) -> list:
        view = _rest(n, "GET", f"/v1/share-groups/{group}/dead-letters").json()
        return sorted((r["partition"], r["waiting"]) for r in view["partitions"])

    assert _everywhere(nodes, waiting) == [(0, 3), (1, 3), (2, 3)]
    new_topic(broker.bootstrap, dlq, 1)  # then written out, and nothing waits anywhere
    wait_for(lambda: all(waiting(n) == [] for n in nodes), 60, "dead letters written")


@pytest.mark.floors
def test_the_records_api_fetches_and_acknowledges_every_partition_from_any_node(nodes, broker):
    """An HTTP consumer behind a load balancer: a fetch through one node acquires from every
    partition, whichever node leads it, and acknowledgements go through any node."""
    topic, leaders = _spread_topic(nodes, broker)
    produce(broker.bootstrap, topic, 60, partitions=6)
    first, second = nodes[0], nodes[1]
    group = f"g-{uuid.uuid4().hex[:6]}"
    base = f"/v1/share-groups/{group}/records"
    ask = {"topics": [topic], "consumer_id": "http-lb", "max_records": 100, "max_wait_ms": 300}
    # a call passed on is answered from what that node leads, and never passed on again
    own = {p for p, node in leaders.items() if node == int(first.options["node_id"])}
    got = _rest(first, "POST", f"{base}/fetch", json=ask, headers={FORWARDED_HEADER: "1"}).json()
    assert {r["partition"] for r in got["records"]} <= own, got
    records = got["records"]
    deadline = time.monotonic() + 20
    while len(records) < 60:
        answer = _rest(first, "POST", f"{base}/fetch", json=ask)
        assert answer.status_code == 200 and not answer.json().get("unreached"), answer.text
        records += answer.json()["records"]
        assert time.monotonic() < deadline, len(records)
    assert sorted((r["partition"], r["offset"]) for r in records) == sorted(
        (p, o) for p in range(6) for o in range(10)
    )
    # every record acknowledged, half through the node that fetched it, half through another
    for node, half in ((first, records[::2]), (second, records[1::2])):
        results = _accept(node, group, "http-lb", half)
        assert len(results) == 6 and all(x["error_code"] is None for x in results), results
    # nothing left to redeliver: every share-partition's start offset is past its records
    for partition in range(6):
        page = _rest(
            first, "GET", f"/v1/share-groups/{group}/partitions/{topic}/{partition}/records"
        )
        assert page.status_code == 200 and page.json()["start_offset"] == 10, page.text
    again = _rest(second, "POST", f"{base}/fetch", json={**ask, "max_wait_ms": 500}).json()
    assert again["records"] == [], again


def test_any_node_lists_every_node_and_sums_a_groups_counters(nodes, broker):
    """What the console's overview and charts read: any node lists every live node with each
    node's own counts, and a group's counters summed over the nodes leading its partitions."""
    topic, _ = _spread_topic(nodes, broker)
    produce(broker.bootstrap, topic, 30, partitions=6)
    group = f"g-{uuid.uuid4().hex[:6]}"
    ask = {"topics": [topic], "consumer_id": "console", "max_records": 100, "max_wait_ms": 300}
    records: list[dict] = []
    deadline = time.monotonic() + 20
    while len(records) < 30:
        answer = _rest(nodes[0], "POST", f"/v1/share-groups/{group}/records/fetch", json=ask)
        assert answer.status_code == 200, answer.text
        records += answer.json()["records"]
        assert time.monotonic() < deadline, len(records)
    # each node counted the first deliveries of the share-partitions it leads
    stats = _everywhere(nodes, lambda n: _rest(n, "GET", f"/v1/share-groups/{group}/stats").json())
    assert (stats["deliveries"], stats["redeliveries"], stats["unreached"]) == (30, 0, [])

    def listed(node: ProxyProcess) -> tuple[list, list]:
        answer = _rest(node, "GET", "/v1/nodes").json()
        return answer["unreached"], [(x["node_id"], x["lease_live"]) for x in answer["nodes"]]

    assert _everywhere(nodes, listed) == ([], [(int(n.options["node_id"]), True) for n in nodes])
    rows = _rest(nodes[2], "GET", "/v1/nodes").json()["nodes"]
    assert all(r["share_partitions_led"] >= 1 for r in rows), rows  # the topic is on each
    # acknowledged: no record waits on, so the group's age stays 0 for the tests after this one
    _accept(nodes[1], group, "console", records)


def test_a_dead_coordinator_is_a_503_until_another_node_takes_its_groups(nodes, broker):
    """It kills a node, and the two left are checked alike (the test after it kills another)."""
    topic = create_topic(broker.bootstrap, 3)
    c, group, home = _member(nodes, topic)
    c.close()
    left = [n for n in nodes if n is not home]
    base = f"/v1/share-groups/{group}"
    _everywhere(nodes, lambda n: _rest(n, "GET", base).json()["state"])
    home.kill()
    for answer in [_rest(n, "GET", base) for n in left]:  # well within its 3 s lease
        assert answer.status_code == 503, answer.text
        problem = answer.json()
        assert problem["error_code"] == "COORDINATOR_NOT_AVAILABLE"
        assert f"proxy node {home.options['node_id']}" in problem["message"]
        assert "cannot be reached" in problem["message"]
    # a caller refused where it arrives is refused there, coordinator or not
    for node in left:
        assert _rest(node, "GET", base, auth=ALICE).status_code == 403
        assert _rest(node, "GET", base, auth=("alice", "wrong")).status_code == 401
    deadline = time.monotonic() + LEASE_MS / 1000 * 5
    while (statuses := {_rest(n, "GET", base).status_code for n in left}) != {200}:
        assert statuses <= {200, 503}, statuses  # retriable until taken over, nothing else
        assert time.monotonic() < deadline, "no node took the group over"
        time.sleep(0.3)
    for ask in _reads(group, topic):
        _everywhere(left, ask)
    assert _rest(left[0], "GET", base).json()["state"] == "Empty"


def test_an_acknowledgement_whose_leader_is_down_is_retriable_never_a_5xx(nodes, broker):
    """Last: kills the leader of a partition; within its lease an acknowledgement for it
    through another node is a retriable NOT_LEADER_OR_FOLLOWER result for that partition,
    while the partition led where the call arrived is settled."""
    live = [n for n in nodes if n.proc is not None]
    asker, victim = live[0], live[-1]
    for _ in range(20):
        topic = create_topic(broker.bootstrap, 6)
        leaders = wait_for_view(live, topic)
        if len(set(leaders.values())) == len(live):
            break
    else:
        raise AssertionError("no topic spread over every live node in 20 tries")
    produce(broker.bootstrap, topic, 12, partitions=6)
    victim_id = int(victim.options["node_id"])
    gone = next(p for p, node in leaders.items() if node == victim_id)
    kept = next(p for p, node in leaders.items() if node == int(asker.options["node_id"]))
    base = f"/v1/share-groups/g-{uuid.uuid4().hex[:6]}/records"
    ask = {"topics": [topic], "consumer_id": "http-down", "max_records": 50, "max_wait_ms": 300}
    records: list[dict] = []
    deadline = time.monotonic() + 20
    while not {gone, kept} <= {r["partition"] for r in records}:
        records += _rest(asker, "POST", f"{base}/fetch", json=ask).json()["records"]
        assert time.monotonic() < deadline, records
    victim.kill()
    acks = [
        {"topic": topic, "partition": r["partition"], "first_offset": r["offset"],
         "last_offset": r["offset"], "type": "accept"}
        for r in records if r["partition"] in (gone, kept)
    ]  # fmt: skip
    done = _rest(
        asker,
        "POST",
        f"{base}/acknowledge",
        json={"consumer_id": "http-down", "acknowledgements": acks},
    )
    assert done.status_code == 200, done.text
    results = {x["partition"]: x for x in done.json()["results"]}
    assert results[kept]["error_code"] is None, results
    assert results[gone]["error_code"] == "NOT_LEADER_OR_FOLLOWER", results
    assert f"proxy node {victim_id}" in results[gone]["message"], results
    assert "retry" in results[gone]["message"], results
