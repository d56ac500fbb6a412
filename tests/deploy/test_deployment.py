"""The deployment files, checked as far as a machine without a container engine can: the
compose file validates (docker-compose's own schema) and wires the five services together,
every image is pinned, the image runs as a non-root user, and the wheel the image installs
carries the migrations."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from shareproxy.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"kafka", "postgres", "shareproxy", "prometheus", "grafana"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_docker_compose_validates_the_file():
    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is missing: apt-get install docker-compose (.ci/run does)"
    run = subprocess.run(
        [tool, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr


def test_five_services_with_pinned_images_healthchecks_and_start_order(compose):
    services = compose["services"]
    assert set(services) == SERVICES
    for name, service in services.items():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and re.search(r"\d", tag) and tag != "latest", f"{name}: {image} not pinned"
        assert "healthcheck" in service, f"{name} has no healthcheck"
        for dep, cond in service.get("depends_on", {}).items():
            assert cond == {"condition": "service_healthy"}, (name, dep)
    assert set(services["shareproxy"]["depends_on"]) == {"kafka", "postgres"}
    assert "shareproxy" in services["prometheus"]["depends_on"]
    assert "prometheus" in services["grafana"]["depends_on"]


def test_kafka_is_3_9_in_kraft_mode(compose):
    kafka = compose["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:3.9.")
    env = kafka["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any("ZOOKEEPER" in k for k in env)


def test_the_proxy_migrates_then_serves_pointed_at_kafka_and_postgres(compose):
    proxy = compose["services"]["shareproxy"]
    command = " ".join(proxy["entrypoint"])
    assert command.index("shareproxy migrate") < command.index("exec shareproxy serve")
    env = proxy["environment"]
    assert env["SHAREPROXY_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert env["SHAREPROXY_STATE_URL"].startswith("postgresql://")
    assert "@postgres:5432/" in env["SHAREPROXY_STATE_URL"]
    fields = set(Settings.model_fields)
    for key in env:  # a misspelt setting would be ignored silently by the proxy
        assert key.removeprefix("SHAREPROXY_").lower() in fields, key
    admin_port = env["SHAREPROXY_ADMIN_LISTEN"].rpartition(":")[2]
    assert f"{admin_port}:{admin_port}" in proxy["ports"]


def _mounts(service: dict) -> dict[str, str]:
    """container path → host path (relative to the compose file) of the bind mounts."""
    out = {}
    for volume in service.get("volumes", []):
        host, container, *_ = volume.split(":")
        if host.startswith("."):
            out[container] = host
    return out


def test_prometheus_scrapes_the_proxy_and_grafana_is_provisioned(compose):
    services = compose["services"]
    prom_mounts = _mounts(services["prometheus"])
    config = yaml.safe_load((ROOT / prom_mounts["/etc/prometheus/prometheus.yml"]).read_text())
    (job,) = config["scrape_configs"]
    admin_port = services["shareproxy"]["environment"]["SHAREPROXY_ADMIN_LISTEN"].rpartition(":")[2]
    assert job["job_name"] == "shareproxy"
    assert job["static_configs"][0]["targets"] == [f"shareproxy:{admin_port}"]

    grafana = _mounts(services["grafana"])
    provisioning = ROOT / grafana["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards/shareproxy.yml").read_text())[
        "providers"
    ]
    dashboards_dir = provider["options"]["path"]
    assert grafana[dashboards_dir] == "./dashboards"
    for path in (ROOT / "dashboards").glob("*.json"):
        dashboard = json.loads(path.read_text())
        uids = {p["datasource"]["uid"] for p in dashboard["panels"]}
        assert uids == {source["uid"]}, path.name


def test_the_image_runs_as_a_non_root_user_from_pinned_bases():
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    bases = [line.split()[1] for line in lines if line.startswith("FROM ")]
    assert bases and all(re.search(r":\d+\.\d+\.\d+", b) for b in bases), bases
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert any(line.startswith("ENTRYPOINT") and "shareproxy" in line for line in lines)


def test_the_wheel_the_image_installs_carries_the_migrations(tmp_path):
    """What the Dockerfile's build stage does (pip wheel), then migrate from the installed
    wheel alone, outside the source tree."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    (wheel,) = wheels.glob("shareproxy-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [python, "-c", "import shareproxy; print(shareproxy.__file__)"],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env,
        check=True,
    ).stdout
    assert str(env_dir) in where, f"the wheel was not the shareproxy imported: {where}"
    run = subprocess.run(
        [python, "-m", "shareproxy.cli", "migrate", "--state-url", f"sqlite:///{outside}/s.db"],
        capture_output=True,
        text=True,
        cwd=outside,
        env=clean_env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "migrated" in run.stdout
