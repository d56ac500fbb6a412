"""No password a user gives reaches the terminal: every error a bad or unreachable URL, or an
upstream that cannot be reached with its SASL password, makes shows the URL with its password
hidden. And ``--print-config`` writes a secret as a reference to the environment variable that
holds it, so the file it prints serves as it is, with the same environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from shareproxy.host import exits
from shareproxy.host.processes import free_port
from tests.support.cli_runs import run_cli

SECRET = "Planted-Secret-7"


def run(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> tuple[int, str]:
    """(exit code, stdout and stderr) of one command, in a clean SHAREPROXY_* environment."""
    proc = run_cli(*args, env=env, stdin=stdin)
    return proc.returncode, proc.stdout + proc.stderr


def _closed() -> str:
    return f"127.0.0.1:{free_port()}"


def _urls() -> dict[str, str]:
    return {
        "wrong scheme": f"postgres://me:{SECRET}@db.example/x",
        "unknown scheme": f"mysql://me:{SECRET}@db.example/x",
        "bad port": f"postgresql://me:{SECRET}@127.0.0.1:notaport/x",
        "not a URL": f"me:{SECRET}@127.0.0.1/x",
        "unreachable": f"postgresql://me:{SECRET}@{_closed()}/x",
        "password in the query": f"postgresql://me@{_closed()}/x?password={SECRET}",
    }


def _serve(tmp_path: Path, *args: str) -> list[str]:
    return [
        "serve",
        "--bootstrap-servers",
        _closed(),
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--fail-fast",
        *args,
    ]


@pytest.mark.parametrize("kind", list(_urls()))
def test_no_state_url_error_shows_its_password(tmp_path, kind):
    url = _urls()[kind]
    config = tmp_path / "bad.toml"
    config.write_text(f'state_url = "{url}"\n')
    tries = {
        "serve --state-url": (_serve(tmp_path, "--state-url", url), {}),
        "serve, SHAREPROXY_STATE_URL": (_serve(tmp_path), {"SHAREPROXY_STATE_URL": url}),
        "serve --config": (_serve(tmp_path, "--config", str(config)), {}),
        "migrate": (["migrate", "--state-url", url], {}),
        "users add": (["users", "add", "a", "--password-stdin", "--state-url", url], {}),
        "demo --nodes 2": (["demo", "--nodes", "2", "--records", "1", "--state-url", url], {}),
    }
    for what, (args, env) in tries.items():
        code, output = run(*args, env=env, stdin="p\n")
        assert code != exits.OK, (what, output)
        assert SECRET not in output, (what, output)
        assert "Traceback" not in output, (what, output)


def test_no_upstream_or_admin_api_error_shows_a_password(tmp_path):
    sasl = [
        "--upstream-security-protocol",
        "SASL_PLAINTEXT",
        "--upstream-sasl-username",
        "me",
        "--state-url",
        f"sqlite:///{tmp_path}/state.db",
    ]
    in_env = {"SHAREPROXY_UPSTREAM_SASL_PASSWORD": SECRET}
    tries = {
        "unreachable upstream": (_serve(tmp_path, *sasl), in_env),
        "a password flag": (_serve(tmp_path, *sasl, "--upstream-sasl-password", SECRET), {}),
        "a password flag with =": (
            _serve(tmp_path, *sasl, f"--upstream-sasl-password={SECRET}"),
            {},
        ),
        "a bootstrap server with a password": (
            _serve(tmp_path, *sasl, "--bootstrap-servers", f"me:{SECRET}@{_closed()}"),
            {},
        ),
        "unreachable admin API": (
            ["groups", "list", "--admin-url", f"http://me:{SECRET}@{_closed()}"],
            {},
        ),
        "admin API, bad port": (
            ["acls", "list", "--admin-url", f"http://me:{SECRET}@127.0.0.1:notaport"],
            {},
        ),
    }
    for what, (args, env) in tries.items():
        code, output = run(*args, env=env)
        assert code != exits.OK, (what, output)
        assert SECRET not in output, (what, output)
        assert "Traceback" not in output, (what, output)


def test_print_config_writes_secrets_as_references_that_serve_reads(tmp_path):
    """The printed file holds no secret, and ``serve --config`` with it and the same
    environment has the same settings in force."""
    url = f"postgresql://me:{SECRET}@{_closed()}/x"
    env = {"SHAREPROXY_STATE_URL": url, "SHAREPROXY_UPSTREAM_SASL_PASSWORD": SECRET}
    flags = ["--upstream-security-protocol", "SASL_SSL", "--upstream-sasl-username", "me"]
    code, printed = run("serve", *flags, "--print-config", env=env)
    assert code == exits.OK, printed
    assert SECRET not in printed and "***" not in printed, printed
    config = tmp_path / "printed.toml"
    config.write_text(printed)
    code, again = run("serve", "--config", str(config), "--print-config", env=env)
    assert code == exits.OK, again
    assert again == printed
    code, output = run(*_serve(tmp_path, "--config", str(config)), env=env)
    assert code == exits.UNAVAILABLE, output  # the store's password was read: Postgres is down
    assert "cannot use the state store postgresql://me:***@" in output, output
    assert SECRET not in output, output
