"""``serve --nodes N``: each node's settings and command line, decided before any process
starts."""

from __future__ import annotations

import os
import sys

import pytest

from shareproxy.host.cores import cpu_limit, usable_cores
from shareproxy.node.commands import node_command, node_settings, shift_ports
from shareproxy.settings import loader
from shareproxy.settings.problems import SettingsInvalid

PG = "postgresql://u@db:5432/share"


def test_ports_move_by_the_node_index_and_an_ephemeral_port_stays_ephemeral():
    assert shift_ports("0.0.0.0:9092", 2) == "0.0.0.0:9094"
    assert shift_ports("PLAINTEXT://h:9092,SSL://h:9093", 1) == "PLAINTEXT://h:9093,SSL://h:9094"
    assert shift_ports("[::1]:9092", 3) == "[::1]:9095"
    assert shift_ports("127.0.0.1:0", 5) == "127.0.0.1:0"


def test_each_node_has_its_own_id_listeners_and_admin_port():
    s = loader.load({"state_url": PG, "nodes": "3", "node_id": "4",
                        "admin_listen": "0.0.0.0:8080",
                        "advertised_listener": "proxy.example:19092"})  # fmt: skip
    assert node_settings(s, 0) == {
        "node_id": 4,
        "nodes": 1,
        "listen": "0.0.0.0:9092",
        "advertised_listener": "proxy.example:19092",
        "admin_listen": "0.0.0.0:8080",
    }
    assert node_settings(s, 2)["node_id"] == 6
    assert node_settings(s, 2)["listen"] == "0.0.0.0:9094"
    assert node_settings(s, 2)["advertised_listener"] == "proxy.example:19094"
    assert node_settings(s, 2)["admin_listen"] == "0.0.0.0:8082"


def test_a_nodes_command_keeps_the_other_flags_and_overrides_its_own():
    flags = {"state_url": PG, "nodes": "2", "listen": "x:1", "auto_migrate": False,
             "fail_fast": True, "log_level": None}  # fmt: skip
    cmd = node_command(flags, None, {"node_id": 2, "nodes": 1, "listen": "x:2"}).argv
    assert cmd[:4] == [sys.executable, "-m", "shareproxy.cli", "serve"]
    args = cmd[4:]
    assert args.count("--listen") == 1 and args[args.index("--listen") + 1] == "x:2"
    assert args[args.index("--nodes") + 1] == "1" and args[args.index("--node-id") + 1] == "2"
    assert "--no-migrate" in args and "--fail-fast" in args and "--log-level" not in args


def test_several_nodes_need_a_postgres_store():
    with pytest.raises(SettingsInvalid, match="Postgres"):
        loader.load({"nodes": "2", "state_url": "sqlite:///x.db"})
    assert loader.load({"nodes": "2", "state_url": PG}).nodes == 2


def test_several_listeners_step_by_their_number_so_nodes_never_share_a_port():
    s = loader.load({"state_url": PG, "nodes": "2",
                     "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"})  # fmt: skip
    assert node_settings(s, 0)["listeners"] == "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"
    assert node_settings(s, 1)["listeners"] == "PLAINTEXT://:9094,SASL_PLAINTEXT://:9095"
    assert node_settings(s, 1)["admin_listen"] == "127.0.0.1:8081"


def test_each_node_advertises_its_own_admin_url_and_a_bad_one_is_refused():
    s = loader.load({"state_url": PG, "nodes": "3", "admin_listen": "0.0.0.0:8080",
                        "admin_advertised_url": "http://proxy.example:8080/"})  # fmt: skip
    assert s.admin_advertised_url == "http://proxy.example:8080"
    assert node_settings(s, 2)["admin_advertised_url"] == "http://proxy.example:8082"
    assert "admin_advertised_url" not in node_settings(loader.load({"state_url": PG}), 0)
    for bad in ("proxy.example:8080", "ftp://proxy.example:8080", "http://"):
        with pytest.raises(SettingsInvalid, match="admin"):
            loader.load({"state_url": PG, "admin_advertised_url": bad})


def test_nodes_auto_is_a_count_or_auto_and_needs_postgres_too():
    assert loader.load({"nodes": "auto", "state_url": PG}).nodes == "auto"
    assert loader.load({"nodes": " 64 ", "state_url": PG}).nodes == 64
    for wrong in ("0", "65", "-1", "many", "2.5"):
        with pytest.raises(SettingsInvalid, match="nodes"):
            loader.load({"nodes": wrong, "state_url": PG})
    with pytest.raises(SettingsInvalid, match="Postgres"):
        loader.load({"nodes": "auto", "state_url": "sqlite:///x.db"})


@pytest.mark.parametrize(
    ("cpu_max", "cores"),
    [("max 100000", None), ("200000 100000", 2), ("150000 100000", 2), ("50000 100000", 1),
     ("", None), ("garbage", None), ("x 100000", None), ("0 100000", None)],
)  # fmt: skip
def test_a_cgroup_cpu_limit_is_read_as_whole_cores_rounded_up(cpu_max, cores):
    assert cpu_limit(cpu_max) == cores


def test_usable_cores_are_the_affinity_bounded_by_the_cgroup_limit(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    assert usable_cores(tmp_path / "absent") == affinity
    cpu_max.write_text("max 100000\n")
    assert usable_cores(cpu_max) == affinity
    cpu_max.write_text("100000 100000\n")
    assert usable_cores(cpu_max) == 1
    cpu_max.write_text(f"{(affinity + 8) * 100000} 100000\n")
    assert usable_cores(cpu_max) == affinity


def test_a_nodes_secrets_go_in_its_environment_never_on_its_command_line():
    """``ps`` shows every user a command line; a process's environment only its own user."""
    url = "postgresql://app:Hidden-Pw-9@db.example/shareproxy"
    flags = {"state_url": url, "upstream_sasl_password": "Sasl-Pw-3", "listen": "x:1"}
    cmd = node_command(flags, None, {"node_id": 1, "nodes": 1})
    assert not any("Hidden-Pw-9" in a or "Sasl-Pw-3" in a for a in cmd.argv)
    assert cmd.secrets == {
        "SHAREPROXY_STATE_URL": url,
        "SHAREPROXY_UPSTREAM_SASL_PASSWORD": "Sasl-Pw-3",
    }
    assert cmd.environment()["SHAREPROXY_STATE_URL"] == url
    assert loader.load({"state_url": url}).state_url == url  # as the node reads it back
