"""A mistake made against the admin API is answered in one line that says what to do: over
REST (the admin app on fakes) and through the CLI, whose line comes from that answer."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from shareproxy.cli.admin_client import PASSWORD_ENV, TOKEN_ENV, USER_ENV
from shareproxy.core.acl import Operation, ResourceType
from shareproxy.host import exits
from tests.support.admin_app import Directory, Grants, Places, admin_app, admin_nodes, serving

CLI = [sys.executable, "-m", "shareproxy.cli"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHAREPROXY_")}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, env={**clean, **(env or {})}
    )


def _error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    (line,) = [x for x in stderr.splitlines() if x.startswith("error: ")]
    return line


async def test_a_401_tells_the_cli_user_how_to_log_in():
    app = admin_app(Places(), Grants(), Directory())  # security on: no caller is anonymous
    async with serving(app) as port:
        url = f"http://127.0.0.1:{port}"
        bare = await asyncio.to_thread(_cli, "groups", "list", "--admin-url", url)
        assert bare.returncode == exits.FAILED, bare.stderr
        line = _error_line(bare.stderr)
        assert "(HTTP 401)" in line
        assert all(name in line for name in (USER_ENV, PASSWORD_ENV, TOKEN_ENV)), line
        wrong = await asyncio.to_thread(
            _cli, "groups", "list", "--admin-url", url, env={TOKEN_ENV: "not-a-token"}
        )
        assert wrong.returncode == exits.FAILED
        assert f"the token in {TOKEN_ENV} was refused" in _error_line(wrong.stderr)


def test_the_help_of_commands_that_call_the_api_says_how_to_log_in():
    for command in (["groups"], ["users"], ["acls"], ["groups", "list"], ["acls", "remove"]):
        shown = " ".join(_cli(*command, "--help").stdout.split())  # unwrapped
        assert all(name in shown for name in (USER_ENV, PASSWORD_ENV, TOKEN_ENV)), command


async def test_an_unknown_state_lists_the_valid_ones():
    async with admin_nodes() as n:
        answer = await n.call("GET", "/v1/share-groups", params={"state": "Stabel"})
        assert answer.status_code == 422, answer.text
        assert answer.json() == {
            "error_code": "INVALID_REQUEST",
            "message": "unknown state 'Stabel' (valid: Empty, Stable, Dead)",
        }


async def test_a_reset_datetime_not_in_iso_8601_is_refused_with_an_example():
    async with admin_nodes() as n:
        n.grants.grant("alice", Operation.READ, ResourceType.GROUP, "g")
        answer = await n.call(
            "POST",
            "/v1/share-groups/g/offsets/reset",
            json={"to": "datetime", "datetime": "yesterday"},
        )
        assert answer.status_code == 422, answer.text
        message = answer.json()["message"]
        assert message.startswith("datetime: ") and "ISO 8601, e.g. 2026-11-21T10:00:00Z" in message


class NoRules(Grants):
    """Security with no users or ACL rules to remove."""

    async def delete_user(self, name: str) -> bool:
        return False

    async def delete_acls(self, filters: list[object]) -> list[list[object]]:
        return [[] for _ in filters]


async def test_removing_or_releasing_what_does_not_exist_is_one_line_and_exit_1():
    """Each action naming a member, a user or ACL rules that do not exist is refused (404 with
    a message), and the CLI says so in one line with exit code 1, not an empty table."""
    places, grants = Places(), NoRules()
    places.members["g"] = {"m1"}
    grants.grant("alice", Operation.READ, ResourceType.GROUP, "g")
    grants.grant("alice", Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    async with serving(admin_app(places, grants, Directory())) as port:
        url, login = f"http://127.0.0.1:{port}", {TOKEN_ENV: "alice"}
        for args, code, names in (
            (
                ["groups", "release-member", "g", "NoSuchMember"],
                "UNKNOWN_MEMBER_ID",
                "NoSuchMember",
            ),
            (["users", "remove", "nobody"], "RESOURCE_NOT_FOUND", "nobody"),
            (["acls", "remove", "--principal", "User:nobody"], "RESOURCE_NOT_FOUND", "ACL rule"),
        ):
            done = await asyncio.to_thread(_cli, *args, "--admin-url", url, env=login)
            assert done.returncode == exits.FAILED, (args, done.stdout, done.stderr)
            line = _error_line(done.stderr)
            assert line.startswith(f"error: {code}: ") and names in line, line
            assert line.endswith("(HTTP 404)") and done.stdout == "", line
        idle = await asyncio.to_thread(
            _cli, "groups", "release-member", "g", "m1", "-o", "json", "--admin-url", url, env=login
        )
        assert idle.returncode == 0, idle.stderr  # a member holding nothing: nothing released
