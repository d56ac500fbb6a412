"""Bad input to the REST admin API: every refusal is a 4xx naming the problem, never a 500,
and changes nothing."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

BAD_GROUPS = {"nul": "a%00b", "long": "g" * 256}


def _group_routes(group: str) -> list[tuple[str, str, dict | None]]:
    base = f"/v1/share-groups/{group}"
    return [
        ("GET", base, None),
        ("GET", f"{base}/offsets", None),
        ("POST", f"{base}/offsets/reset", {"to": "earliest", "dry_run": True}),
        ("DELETE", f"{base}/offsets?topic=t", None),
        ("DELETE", base, None),
        ("GET", f"{base}/config", None),
        ("PUT", f"{base}/config", {"configs": {"share.delivery.count.limit": "4"}}),
        ("GET", f"{base}/partitions/t/0/records", None),
        ("POST", f"{base}/partitions/t/0/records/accept", {"first_offset": 0}),
        ("POST", f"{base}/members/m/release", None),
        ("POST", f"{base}/records/fetch", {"topics": ["t"], "max_wait_ms": 0}),
        (
            "POST",
            f"{base}/records/acknowledge",
            {
                "consumer_id": "c",
                "acknowledgements": [
                    {"topic": "t", "partition": 0, "first_offset": 0, "last_offset": 0}
                ],
            },
        ),
    ]


@pytest.fixture(scope="module")
def admin(broker, postgres):
    from tests.support.proxy import ProxyProcess

    url = postgres.create_database(f"r{uuid.uuid4().hex[:6]}", template="template_migrated")
    p = ProxyProcess(broker.bootstrap, url).start()
    yield p
    p.stop()
    errors = [x for x in p.log().splitlines() if " ERROR " in x or x.startswith("Traceback")]
    assert not errors, "the proxy logged errors:\n" + "\n".join(errors)


@pytest.mark.floors
@pytest.mark.parametrize("kind", sorted(BAD_GROUPS))
def test_every_group_route_refuses_a_group_id_the_store_cannot_hold(admin, kind):
    with httpx.Client(base_url=admin.admin_url, timeout=10) as http:
        for method, path, body in _group_routes(BAD_GROUPS[kind]):
            r = http.request(method, path, json=body)
            assert r.status_code == 422, (method, path, r.status_code, r.text)
            assert r.json()["error_code"] == "INVALID_REQUEST"
            assert "group id" in r.json()["message"], r.text


def test_a_topic_name_no_topic_can_have_is_refused(admin):
    with httpx.Client(base_url=admin.admin_url, timeout=10) as http:
        http.put("/v1/share-groups/g-topics/config", json={"configs": {}})
        r = http.get("/v1/share-groups/g-topics/offsets", params={"topic": "bad\x00name"})
        assert r.status_code in (404, 422), r.text
        r = http.post(
            "/v1/share-groups/g-topics/records/fetch",
            json={"topics": ["bad\x00name"], "max_wait_ms": 0},
        )
        assert (r.status_code, r.json()["error_code"]) == (422, "INVALID_TOPIC_EXCEPTION"), r.text


@pytest.mark.floors
@pytest.mark.parametrize(
    "change",
    [
        {"max_records": "1"},
        {"max_bytes": 1024.0},
        {"max_wait_ms": True},
        {"topics": "t"},
        {"topics": [1]},
        {"consumer_id": 7},
        {"consumer_id": ""},
        {"max_records": 0},
        {"unknown": 1},
    ],
)
def test_a_fetch_body_of_the_wrong_types_is_a_422_naming_the_field(admin, topic, change):
    body = {"topics": [topic(1)], "max_wait_ms": 0, **change}
    r = httpx.post(f"{admin.admin_url}/v1/share-groups/g-types/records/fetch", json=body)
    assert (r.status_code, r.json()["error_code"]) == (422, "INVALID_REQUEST"), r.text
    assert next(iter(change)) in r.json()["message"], r.text


@pytest.mark.floors
@pytest.mark.parametrize(
    "change",
    [
        {"partition": "0"},
        {"first_offset": 0.0},
        {"last_offset": 2**63},
        {"partition": 2**31},
        {"type": "ACCEPT"},
        {"topic": None},
    ],
)
def test_an_acknowledgement_of_the_wrong_types_is_a_422_naming_the_field(admin, change):
    ack = {"topic": "t", "partition": 0, "first_offset": 0, "last_offset": 0, "type": "accept"}
    body = {"consumer_id": "c", "acknowledgements": [{**ack, **change}]}
    r = httpx.post(f"{admin.admin_url}/v1/share-groups/g-types/records/acknowledge", json=body)
    assert (r.status_code, r.json()["error_code"]) == (422, "INVALID_REQUEST"), r.text
    assert next(iter(change)) in r.json()["message"], r.text


@pytest.mark.long
def test_fetches_racing_deletions_of_their_group_never_fail(admin, topic):
    """A fetch creates the state of the share-partitions it loads; an admin deleting the
    group or its offsets meanwhile removes it before it is claimed. The fetch starts over."""
    t = topic(8)

    async def race() -> set[int]:
        answers: set[int] = set()
        async with httpx.AsyncClient(base_url=admin.admin_url, timeout=30) as http:

            async def fetch(group: str) -> None:
                body = {"topics": [t], "max_wait_ms": 0}
                answers.add(
                    (
                        await http.post(f"/v1/share-groups/{group}/records/fetch", json=body)
                    ).status_code
                )

            async def delete(group: str, whole: bool) -> None:
                for _ in range(20):
                    path = f"/v1/share-groups/{group}" + ("" if whole else f"/offsets?topic={t}")
                    answers.add((await http.delete(path)).status_code)
                    await asyncio.sleep(0.002)

            for i in range(60):
                await asyncio.gather(fetch(f"g-race-{i}"), delete(f"g-race-{i}", i % 2 == 0))
        return answers

    answers = asyncio.run(race())
    assert all(code < 500 for code in answers), answers
    assert 200 in answers


def test_user_names_and_passwords_are_checked(admin):
    with httpx.Client(base_url=admin.admin_url, timeout=10) as http:
        for body in (
            {"name": "a\x00b", "password": "secret"},
            {"name": "a,b", "password": "secret"},
            {"name": "alice", "password": "pa\x07ss"},
            {"name": "alice", "password": "\ufffe"},
        ):
            r = http.post("/v1/users", json=body)
            assert r.status_code == 422, (body, r.text)
        assert http.delete("/v1/users/a%00b").status_code == 422
        assert http.get("/v1/users").json() == []


def test_tokens_without_security_are_a_400_that_says_why(admin):
    r = httpx.post(f"{admin.admin_url}/v1/tokens", timeout=10)
    assert r.status_code == 400
    assert r.json()["error_code"] == "SECURITY_DISABLED"
    assert "enable SASL" in r.json()["message"]


@pytest.mark.floors
def test_concurrent_creates_of_one_user_create_it_once(admin):
    async def create_many() -> list[int]:
        async with httpx.AsyncClient(base_url=admin.admin_url, timeout=30) as http:
            answers = await asyncio.gather(
                *(
                    http.post("/v1/users", json={"name": "racer", "password": f"pw{i}"})
                    for i in range(8)
                )
            )
        return sorted(r.status_code for r in answers)

    assert asyncio.run(create_many()) == [200] * 7 + [201]
    users = httpx.get(f"{admin.admin_url}/v1/users", timeout=10).json()
    assert [u["name"] for u in users] == ["racer"]
