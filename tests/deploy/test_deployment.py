"""The deployment files, checked as far as a machine without a container engine can: the
compose file validates (docker-compose's own schema) and wires the five services together,
every image is pinned and tagged with the one version, and the image runs as a non-root user.
What the image's build stage builds is tested in test_image.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shareproxy import __version__
from shareproxy.settings.model import Settings

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"kafka", "postgres", "shareproxy", "shareproxy-2", "prometheus", "grafana"}


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


def test_six_services_with_pinned_images_healthchecks_and_start_order(compose):
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
    assert set(services["shareproxy-2"]["depends_on"]) == {"shareproxy"}  # after it migrated
    assert {"shareproxy", "shareproxy-2"} <= set(services["prometheus"]["depends_on"])
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


def test_two_proxy_nodes_share_one_store_each_with_its_own_id_and_ports(compose):
    one, two = compose["services"]["shareproxy"], compose["services"]["shareproxy-2"]
    assert one["image"] == two["image"] and two["entrypoint"] == [
        "shareproxy",
        "serve",
        "--no-migrate",
    ]
    a, b = one["environment"], two["environment"]
    assert a["SHAREPROXY_STATE_URL"] == b["SHAREPROXY_STATE_URL"]
    assert a["SHAREPROXY_BOOTSTRAP_SERVERS"] == b["SHAREPROXY_BOOTSTRAP_SERVERS"]
    assert (a["SHAREPROXY_NODE_ID"], b["SHAREPROXY_NODE_ID"]) == ("1", "2")
    for name, service, env in (("shareproxy", one, a), ("shareproxy-2", two, b)):
        kafka_port = env["SHAREPROXY_LISTEN"].rpartition(":")[2]
        assert env["SHAREPROXY_ADVERTISED_LISTENER"] == f"localhost:{kafka_port}"
        assert f"{kafka_port}:{kafka_port}" in service["ports"]
        admin_port = env["SHAREPROXY_ADMIN_LISTEN"].rpartition(":")[2]
        assert f"{admin_port}:{admin_port}" in service["ports"]
        assert admin_port in " ".join(service["healthcheck"]["test"])
        # the other node passes admin calls on to it by its service name
        assert env["SHAREPROXY_ADMIN_ADVERTISED_URL"] == f"http://{name}:{admin_port}"


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
    assert job["job_name"] == "shareproxy"
    assert job["static_configs"][0]["targets"] == [
        f"{name}:{services[name]['environment']['SHAREPROXY_ADMIN_LISTEN'].rpartition(':')[2]}"
        for name in ("shareproxy", "shareproxy-2")
    ]

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


def test_images_and_the_readme_name_the_one_version(compose):
    assert compose["services"]["shareproxy"]["image"] == f"shareproxy:{__version__}"
    readme = (ROOT / "README.md").read_text()
    dockerfile = (ROOT / "Dockerfile").read_text()
    for text in (readme, dockerfile):
        tags = set(re.findall(r"shareproxy:(\d+\.\d+\.\d+)", text))
        assert tags == {__version__}, tags


def test_the_readme_compose_walkthrough_uses_the_published_ports(compose):
    readme = (ROOT / "README.md").read_text()
    assert "docker compose up -d --build" in readme
    assert compose["services"]["shareproxy"]["build"] == "."
    published = {
        name: {p.split(":")[0] for p in service.get("ports", [])}
        for name, service in compose["services"].items()
    }
    for name, port in (
        ("kafka", "29092"),
        ("shareproxy", "9192"),
        ("shareproxy", "8080"),
        ("shareproxy-2", "9193"),
    ):
        assert port in published[name], (name, published)
        assert f"localhost:{port}" in readme, port


def test_what_the_files_say_of_the_documents_and_the_commands_is_there():
    """A pointer to a section of a document (``docs/page.md, "Heading"``) names a page and a
    heading that exist, and ARCHITECTURE.md names only commands the CLI has."""
    import typer
    from typer.main import get_command

    from shareproxy.cli.app import app

    pointers = 0
    for path in (ROOT / "docker-compose.yml", *sorted((ROOT / "deploy").rglob("*"))):
        if path.is_file():
            for page, section in re.findall(r'([\w/.-]+\.md), \\?"([^"\\]+)\\?"', path.read_text()):
                pointers += 1
                assert (ROOT / page).is_file(), f"{path.name} names a missing page {page}"
                headings = {
                    line.lstrip("#").strip()
                    for line in (ROOT / page).read_text().splitlines()
                    if line.startswith("#")
                }
                assert section in headings, f"{path.name} names {page} section {section!r}"
    assert pointers, "no pointer found: the pattern no longer matches the files"
    root = get_command(app)
    commands = set(root.list_commands(typer.Context(root)))  # type: ignore[attr-defined]
    (row,) = [x for x in (ROOT / "ARCHITECTURE.md").read_text().splitlines() if "| `cli/` |" in x]
    named = set(re.findall(r"`([a-z]+)`", row.split("typer commands:")[1].split(";")[0]))
    assert named <= commands, named - commands
