"""Each mistake a user makes with the command line is one line naming what failed and the
offending value, and the exit code the documentation lists: 2 usage or configuration, 3 a
dependency that cannot be reached or used, 4 a listen address that cannot be bound."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from shareproxy.host import exits
from shareproxy.host.processes import free_port
from shareproxy.persistence import migrate
from tests.support.cli_runs import CLI, run_cli


def run(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> tuple[int, str]:
    """(exit code, stderr) of one command, in a clean SHAREPROXY_* environment."""
    proc = run_cli(*args, env=env, stdin=stdin)
    return proc.returncode, proc.stderr


def one_error(stderr: str) -> str:
    """The single ``error:`` line (nothing else of note, no traceback)."""
    assert "Traceback" not in stderr and "╭" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0].removeprefix("error: ")


def serve(tmp_path: Path, *args: str) -> list[str]:
    """serve with a closed upstream, a fresh SQLite store and free ports, then ``args``."""
    return [
        "serve",
        "--bootstrap-servers",
        f"127.0.0.1:{free_port()}",
        "--state-url",
        f"sqlite:///{tmp_path}/state.db",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        *args,
    ]


@pytest.mark.floors
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--auto-offset-reset", "yesterday"], "--auto-offset-reset yesterday: "),
        (["--delivery-count-limit", "50"], "--delivery-count-limit 50: 50 is outside [2, 10] ("),
        (["--delivery-count-limit", "abc"], "--delivery-count-limit abc: "),
        (["--record-lock-duration-ms", "500"], "--record-lock-duration-ms 500: 500 is outside"),
        (
            ["--heartbeat-interval-ms", "60000"],  # Kafka's bounds: 5-15 s
            "--heartbeat-interval-ms 60000: 60000 is outside [5000, 15000] "
            "(group.share.min.heartbeat.interval.ms",
        ),
        (
            [
                "--heartbeat-interval-ms",
                "50000",
                "--group-share-max-heartbeat-interval-ms",
                "60000",
            ],
            "--heartbeat-interval-ms 50000: must be below",
        ),
        (["--log-format", "xml"], "--log-format xml: "),
        (["--listen", "nowhere"], "--listen nowhere: 'nowhere' is not HOST:PORT"),
        (["--state-url", "mysql://h/db"], "--state-url mysql://h/db: unsupported state store"),
        (["--bootstrap-servers", ""], "--bootstrap-servers : no server given"),
        (["--bootstrap-servers", " , "], "--bootstrap-servers  , : no server given"),
        (["--bogus"], "No such option"),  # click words it differently by version
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, args, expected):
    code, stderr = run(*serve(tmp_path, *args))
    assert code == exits.USAGE, stderr
    assert one_error(stderr).startswith(expected), stderr


def test_a_missing_certificate_is_named_before_anything_is_migrated(tmp_path):
    missing = tmp_path / "server.pem"
    code, stderr = run(
        *serve(tmp_path, "--listeners", "SSL://127.0.0.1:0", "--ssl-certfile", str(missing))
    )
    assert code == exits.USAGE
    assert one_error(stderr) == f"--ssl-certfile {missing}: no such file"
    assert not (tmp_path / "state.db").exists(), "the store was touched before the check"


def test_a_certificate_file_that_is_not_pem_is_named_before_anything_is_migrated(tmp_path):
    bad = tmp_path / "server.pem"
    bad.write_text("not a certificate\n")
    code, stderr = run(
        *serve(tmp_path, "--listeners", "SSL://127.0.0.1:0", "--ssl-certfile", str(bad))
    )
    assert code == exits.USAGE
    assert one_error(stderr).startswith(f"--ssl-certfile {bad}: not a usable PEM")
    assert not (tmp_path / "state.db").exists()


@pytest.mark.floors
def test_config_file_mistakes_exit_2_naming_the_file(tmp_path):
    path = tmp_path / "proxy.toml"
    path.write_text("delivery_count_limit = 50\n")
    code, stderr = run(*serve(tmp_path, "--config", str(path)))
    assert code == exits.USAGE
    assert one_error(stderr) == (
        f"delivery_count_limit = 50 in {path}: 50 is outside [2, 10] "
        "(group.share.min.delivery.count.limit, group.share.max.delivery.count.limit)"
    )
    path.write_text("delivery_limit = 3\n")
    code, stderr = run(*serve(tmp_path, "--config", str(path)))
    assert code == exits.USAGE
    assert one_error(stderr).startswith(f"unknown setting 'delivery_limit' in {path}")


@pytest.mark.floors
def test_print_config_shows_the_precedence_of_flags_environment_and_file(tmp_path):
    path = tmp_path / "proxy.yaml"
    path.write_text("delivery_count_limit: 7\nnode_id: 9\nlog_format: json\n")
    code, stdout = (lambda p: (p.returncode, p.stdout + p.stderr))(
        subprocess.run(
            [
                *CLI,
                "serve",
                "--config",
                str(path),
                "--print-config",
                "--node-id",
                "4",
                "--state-url",
                "postgresql://app:pw-Hidden-2@db/shareproxy",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "SHAREPROXY_DELIVERY_COUNT_LIMIT": "6"},
        )
    )
    assert code == 0, stdout
    assert "node_id = 4\n" in stdout  # flag
    assert "delivery_count_limit = 6\n" in stdout  # environment over the file
    assert 'log_format = "json"\n' in stdout  # the file over the default
    # a URL holding a password: a reference to the variable to set, not a URL that cannot serve
    assert "# it holds a secret: set SHAREPROXY_STATE_URL" in stdout
    assert 'state_url = "${SHAREPROXY_STATE_URL}"\n' in stdout
    assert "pw-Hidden-2" not in stdout


@pytest.mark.floors
def test_an_unreachable_state_store_exits_3_naming_it(tmp_path):
    store = f"postgresql://nobody:pw-Hidden-1@127.0.0.1:{free_port()}/shareproxy"
    code, stderr = run(*serve(tmp_path, "--state-url", store))
    assert code == exits.UNAVAILABLE
    line = one_error(stderr)
    assert line.startswith("cannot use the state store postgresql://nobody:***@127.0.0.1:")
    assert "refused" in line.lower() and "pw-Hidden-1" not in stderr


@pytest.mark.floors
def test_an_unreachable_upstream_with_fail_fast_exits_3_saying_what_to_check(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    args = serve(tmp_path, "--fail-fast")
    args[args.index("--bootstrap-servers") + 1] = address
    code, stderr = run(*args)
    assert code == exits.UNAVAILABLE
    line = one_error(stderr)
    assert line.startswith(f"--bootstrap-servers {address}: cannot reach {address}")
    assert "refused" in line.lower() and "check --bootstrap-servers" in line


@pytest.mark.parametrize("which", ["--listen", "--admin-listen"])
def test_a_port_in_use_exits_4_for_either_listener(tmp_path, which):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        args = serve(tmp_path)
        args[args.index(which) + 1] = address
        code, stderr = run(*args)
    assert code == exits.CANNOT_LISTEN, stderr
    assert one_error(stderr) == f"{which} {address}: address already in use"


@pytest.mark.parametrize("retries", [1, 2, 4])
def test_retries_back_off_one_line_each_and_a_signal_stops_them_cleanly(tmp_path, retries):
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*CLI, *serve(tmp_path)], stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while log.read_text().count("not reachable") < retries:
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                time.sleep(0.05)
            time.sleep(0.2 * retries)  # somewhere in the wait, or in the next attempt
            proc.send_signal(signal.SIGINT)
            code = proc.wait(20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert code == exits.OK, text
    assert "Traceback" not in text and "Event loop is closed" not in text, text
    assert "stopping before the start completed" in text
    lines = text.splitlines()
    tries = [line for line in lines if "not reachable" in line]
    assert all("Connection refused" in x and "check --bootstrap-servers" in x for x in tries)
    assert not [line for line in lines if " aiokafka " in line], text  # ours is the one line
    delays = [float(line.split("retrying in ")[1].split("s;")[0]) for line in tries]
    assert delays == [0.5 * 2**i for i in range(len(delays))], text


@pytest.mark.floors
def test_users_add_on_a_store_without_schema_says_to_migrate_it(tmp_path):
    url = f"sqlite:///{tmp_path}/fresh.db"
    code, stderr = run("users", "add", "alice", "--password-stdin", "--state-url", url, stdin="p\n")
    assert code == exits.UNAVAILABLE
    assert one_error(stderr) == (
        f"the state store {url} has schema none, expected {migrate.head_revision(url)}: "
        f"run `shareproxy migrate --state-url {url}` first"
    )


def test_users_add_on_an_unreachable_store_names_it(tmp_path):
    url = f"postgresql://nobody@127.0.0.1:{free_port()}/x"
    code, stderr = run("users", "add", "alice", "--password-stdin", "--state-url", url, stdin="p\n")
    assert code == exits.UNAVAILABLE
    assert one_error(stderr).startswith(f"cannot use the state store {url}: ")


def test_an_unreachable_admin_api_exits_3_naming_it():
    url = f"http://127.0.0.1:{free_port()}"
    code, stderr = run("groups", "list", "--admin-url", url)
    assert code == exits.UNAVAILABLE
    assert one_error(stderr).startswith(f"cannot reach the admin API at {url}")


def test_users_add_with_a_piped_password_and_no_flag_says_how_to_give_it():
    code, stderr = run("users", "add", "alice", stdin="secret\n")
    assert code == exits.USAGE, stderr
    assert "--password-stdin" in one_error(stderr)


def test_reset_to_a_datetime_not_in_iso_8601_gives_the_form_with_an_example():
    code, stderr = run("groups", "reset-offsets", "g", "--to-datetime", "yesterday")
    assert code == exits.USAGE, stderr
    line = one_error(stderr)
    assert line.startswith(
        "--to-datetime 'yesterday': expected ISO 8601, e.g. 2026-11-21T10:00:00Z"
    )


def test_migrate_check_on_an_empty_store_says_it_has_no_schema_and_what_creates_it(tmp_path):
    url = f"sqlite:///{tmp_path}/fresh.db"
    code, stderr = run("migrate", "--check", "--state-url", url)
    assert code == exits.FAILED
    assert stderr.strip() == (
        f"the state store {url} has no schema yet: run `shareproxy migrate --state-url {url}` "
        "to create it"
    )
