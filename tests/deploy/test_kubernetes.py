"""The Kubernetes manifests (deploy/kubernetes/), checked without a cluster: each validates
against one Kubernetes version's schemas (kubernetes-validate ships them: no network), and what
a pod of each would run — the image's entrypoint, the manifest's arguments and its environment
as the kubelet resolves it — is run here: the node's settings from its pod name, the migrate Job
against a real Postgres, then a node against a real broker, answering its probes."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions

from shareproxy import __version__
from shareproxy.demo.tansu import TansuBroker
from shareproxy.host import exits
from shareproxy.host.processes import free_port
from shareproxy.settings.model import Settings
from tests.support.deploy_tools import KUBERNETES

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"
SECRET = ("shareproxy-state", "state-url")  # the Secret and key holding the state store's URL


def documents() -> list[tuple[str, dict]]:
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        found += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return found


@pytest.fixture(scope="module")
def k8s() -> dict[tuple[str, str], dict]:
    """(kind, name) → the manifest's object."""
    return {(d["kind"], d["metadata"]["name"]): d for _, d in documents()}


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def the_container(obj: dict) -> dict:
    (container,) = pod_spec(obj)["containers"]
    return container


def entrypoint() -> list[str]:
    """The Dockerfile's ENTRYPOINT, which a container without ``command`` runs."""
    (line,) = [
        x for x in (ROOT / "Dockerfile").read_text().splitlines() if x.startswith("ENTRYPOINT")
    ]
    return json.loads(line.removeprefix("ENTRYPOINT"))


def argv(container: dict) -> list[str]:
    """What the container runs, with this tree's CLI for the image's ``shareproxy``."""
    assert "command" not in container, "the image's ENTRYPOINT (shareproxy) is kept"
    words = entrypoint() + container["args"]
    assert words[0] == "shareproxy", words
    return [sys.executable, "-m", "shareproxy.cli", *words[1:]]


def resolve(container: dict, pod: str, namespace: str, secrets: dict) -> dict[str, str]:
    """The container's environment as the kubelet makes it for a StatefulSet's pod: the downward
    API's fields, Secret keys, and $(NAME) in a value replaced by a variable above it."""
    fields = {
        "metadata.name": pod,
        "metadata.namespace": namespace,
        POD_INDEX: pod.rpartition("-")[2],  # the StatefulSet controller's label: the ordinal
    }
    env: dict[str, str] = {}
    for var in container["env"]:
        source = var.get("valueFrom", {})
        if "fieldRef" in source:
            value = fields[source["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value = secrets[(ref["name"], ref["key"])]
        else:
            value = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env[m[1]], var["value"])
        env[var["name"]] = value
    return env


def run(container: dict, env: dict[str, str], *extra: str, **kwargs) -> subprocess.Popen:
    """The container's process here (this tree on PYTHONPATH), with only its own settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHAREPROXY_")}
    return subprocess.Popen([*argv(container), *extra], env={**clean, **env}, **kwargs)


def finish(proc: subprocess.Popen, timeout: float) -> str:
    """Its output once it exits; killed, and the test failed, when it runs past ``timeout``."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running after {timeout} s: {proc.communicate()[0]}")


def test_every_manifest_validates_against_the_kubernetes_schemas():
    shipped = all_versions()
    assert KUBERNETES in shipped, f"kubernetes-validate ships {shipped}: move KUBERNETES up"
    found = documents()
    assert {d["kind"] for _, d in found} == {"Job", "Service", "StatefulSet", "PodDisruptionBudget"}
    for name, doc in found:
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name}: {doc['kind']} {doc['metadata']['name']}: {exc.message}")
    # strict: a misspelt field fails, as the API server would refuse it
    job = copy.deepcopy(next(d for _, d in found if d["kind"] == "Job"))
    job["spec"]["template"]["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicyy"):
        kubernetes_validate.validate(job, KUBERNETES, strict=True)


def test_every_setting_named_is_one_the_proxy_has_and_the_image_is_this_version(k8s):
    fields = set(Settings.model_fields)
    for obj in (k8s["Job", "shareproxy-migrate"], k8s["StatefulSet", "shareproxy"]):
        container = the_container(obj)
        assert container["image"] == f"shareproxy:{__version__}"
        for var in container["env"]:  # a misspelt setting would be ignored silently
            if var["name"].startswith("SHAREPROXY_"):
                assert var["name"].removeprefix("SHAREPROXY_").lower() in fields, var["name"]


def test_the_state_url_comes_from_the_secret_the_readme_creates(k8s):
    readme = (ROOT / "README.md").read_text()
    (create,) = [x for x in readme.splitlines() if x.startswith("kubectl create secret")]
    assert f"generic {SECRET[0]} --from-literal={SECRET[1]}=postgresql://" in create
    for obj in (k8s["Job", "shareproxy-migrate"], k8s["StatefulSet", "shareproxy"]):
        (var,) = [v for v in the_container(obj)["env"] if v["name"] == "SHAREPROXY_STATE_URL"]
        assert var["valueFrom"]["secretKeyRef"] == {"name": SECRET[0], "key": SECRET[1]}


def test_a_node_takes_its_id_from_its_ordinal_and_advertises_its_own_dns_name(k8s):
    sts, headless = k8s["StatefulSet", "shareproxy"], k8s["Service", "shareproxy-nodes"]
    assert sts["spec"]["serviceName"] == "shareproxy-nodes"
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"]  # a node clients were told of resolves
    container = the_container(sts)
    (node_id,) = [v for v in container["env"] if v["name"] == "SHAREPROXY_NODE_ID"]
    assert node_id["valueFrom"]["fieldRef"]["fieldPath"] == POD_INDEX
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    secrets = {SECRET: "postgresql://shareproxy:secret@postgres:5432/shareproxy"}
    pods = {"shareproxy-0": 0, "shareproxy-2": 2}
    shown = {  # side by side: each start imports the whole CLI
        pod: run(
            container,
            resolve(container, pod, "queues", secrets),
            "--print-config",
            stdout=subprocess.PIPE,
            text=True,
        )
        for pod in pods
    }
    for pod, node in pods.items():
        out = finish(shown[pod], 120)
        assert shown[pod].returncode == 0, out
        settings = tomllib.loads(out)
        assert settings["node_id"] == node
        assert settings["advertised_listener"] == (
            f"{pod}.shareproxy-nodes.queues.svc.cluster.local:{ports['kafka']}"
        )
        assert settings["listen"].rpartition(":")[2] == str(ports["kafka"])
        assert settings["admin_listen"] == f"0.0.0.0:{ports['admin']}"
        assert settings["admin_advertised_url"] == (  # a group's calls reach its coordinator
            f"http://{pod}.shareproxy-nodes.queues.svc.cluster.local:{ports['admin']}"
        )
        assert settings["auto_migrate"] is False  # the Job migrates; nodes at once would race


def test_the_services_and_the_budget_select_the_nodes_and_name_their_ports(k8s):
    sts, job = k8s["StatefulSet", "shareproxy"], k8s["Job", "shareproxy-migrate"]
    node_labels = sts["spec"]["template"]["metadata"]["labels"]
    job_labels = job["spec"]["template"]["metadata"]["labels"]
    named = {p["name"] for p in the_container(sts)["ports"]}
    assert sts["spec"]["selector"]["matchLabels"].items() <= node_labels.items()
    for name in ("shareproxy", "shareproxy-nodes"):
        service = k8s["Service", name]["spec"]
        assert service["selector"].items() <= node_labels.items()
        assert not service["selector"].items() <= job_labels.items()
        assert {p["targetPort"] for p in service["ports"]} == named == {"kafka", "admin"}
    assert k8s["Service", "shareproxy"]["spec"].get("clusterIP") != "None"  # the bootstrap
    budget = k8s["PodDisruptionBudget", "shareproxy"]["spec"]
    assert budget["selector"]["matchLabels"].items() <= node_labels.items()
    assert budget["maxUnavailable"] == 1


def test_probes_on_the_admin_port_and_one_core_per_node(k8s):
    container = the_container(k8s["StatefulSet", "shareproxy"])
    admin = next(p for p in container["ports"] if p["name"] == "admin")
    for probe, path in (
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
        ("startupProbe", "/healthz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": admin["name"]}, probe
    resources = container["resources"]
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "1"  # one event loop


def test_the_job_migrates_the_store_and_a_node_then_serves_its_probes(k8s, postgres, tmp_path):
    """The order the README gives: a node before the Job exits (store not migrated, Kubernetes
    restarts it); after the Job, it serves and answers the paths its probes ask."""
    sts, job = k8s["StatefulSet", "shareproxy"], k8s["Job", "shareproxy-migrate"]
    secrets = {SECRET: postgres.create_database("k8s_order")}
    node = the_container(sts)
    port, admin = free_port(), free_port()
    with TansuBroker() as broker:
        env = resolve(node, "shareproxy-1", "queues", secrets)
        env.update(
            SHAREPROXY_BOOTSTRAP_SERVERS=broker.bootstrap,
            SHAREPROXY_LISTEN=f"127.0.0.1:{port}",
            SHAREPROXY_ADMIN_LISTEN=f"127.0.0.1:{admin}",
        )
        early = run(node, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        err = finish(early, 60)
        assert early.returncode == exits.UNAVAILABLE, err
        assert "shareproxy migrate" in err, err

        task = the_container(job)
        migrate = run(
            task,
            resolve(task, "shareproxy-migrate-x7k2p", "queues", secrets),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out = finish(migrate, 120)
        assert migrate.returncode == 0 and "migrated" in out, out

        log = (tmp_path / "node.log").open("wb")
        proc = run(node, env, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{admin}"
            deadline, ready = time.monotonic() + 60, None
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    ready = httpx.get(base + node["readinessProbe"]["httpGet"]["path"], timeout=5)
                    if ready.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            assert ready is not None and ready.status_code == 200, tmp_path / "node.log"
            assert ready.json()["node"]["node_id"] == 1, ready.json()
            for probe in ("livenessProbe", "startupProbe"):
                path = node[probe]["httpGet"]["path"]
                assert httpx.get(base + path, timeout=5).status_code == 200, probe
            proc.send_signal(signal.SIGTERM)  # what the kubelet sends; then the grace period
            assert proc.wait(pod_spec(sts)["terminationGracePeriodSeconds"]) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
