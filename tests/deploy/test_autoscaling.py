"""The KEDA example (deploy/keda/scaledobject.yaml), checked without a cluster: the ScaledObject
has the fields and types KEDA's v1alpha1 schema wants and targets the example's Deployment; the
Deployment, and the HorizontalPodAutoscaler KEDA makes of the ScaledObject, validate against
Kubernetes' schemas; and each trigger's PromQL, run by promtool on series the proxy's own
collector renders for two nodes, gives the value the example means."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from prometheus_client.metrics_core import Metric

from shareproxy.core.states import RecordState
from shareproxy.telemetry.metrics import REGISTRY, LiveState, NodeFigures, PartitionLabels
from tests.support.deploy_tools import KUBERNETES, ROOT
from tests.support.deploy_tools import promtool as _promtool

EXAMPLE = ROOT / "deploy" / "keda" / "scaledobject.yaml"

# what KEDA's ScaledObject v1alpha1 schema has: its structural schema drops any other field
# silently, so a misspelt one would do nothing
SPEC_FIELDS = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
    "fallback",
    "advanced",
    "triggers",
}
SPEC_INTEGERS = SPEC_FIELDS - {"scaleTargetRef", "fallback", "advanced", "triggers"}
TRIGGER_FIELDS = {"type", "name", "metadata", "metricType", "useCachedMetrics", "authenticationRef"}
# the Prometheus scaler's parameters (trigger metadata: every value a string)
PROMETHEUS_PARAMETERS = {
    "serverAddress",
    "query",
    "threshold",
    "activationThreshold",
    "ignoreNullValues",
    "unsafeSsl",
    "namespace",
    "customHeaders",
    "queryParameters",
    "authModes",
}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset"}
PROMQL_WORDS |= {"and", "or", "unless", "bool"}

ACQUIRED = RecordState.ACQUIRED.name.lower()  # the state label, as node/holdings.py names it


def documents() -> dict[str, dict]:
    """kind → the example's object of that kind (one each)."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs), "one object of each kind"
    return by_kind


@pytest.fixture(scope="module")
def example() -> dict[str, dict]:
    return documents()


def triggers(scaled: dict) -> dict[str, dict]:
    return {t["name"]: t for t in scaled["spec"]["triggers"]}


def the_group(deployment: dict) -> str:
    """The share group the example's consumer joins."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (group,) = [v["value"] for v in container["env"] if v["name"] == "GROUP_ID"]
    return group


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------- the objects


def test_the_scaled_object_has_what_keda_requires_with_its_types(example):
    scaled, deployment = example["ScaledObject"], example["Deployment"]
    assert set(example) == {"Deployment", "ScaledObject"}
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert isinstance(scaled["metadata"]["name"], str)
    assert scaled["metadata"].get("namespace") == deployment["metadata"].get("namespace")
    spec = scaled["spec"]
    assert set(spec) <= SPEC_FIELDS, set(spec) - SPEC_FIELDS
    assert {"scaleTargetRef", "triggers"} <= set(spec)
    for field in SPEC_INTEGERS & set(spec):
        assert is_int(spec[field]), field
    assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    assert spec["cooldownPeriod"] > 0 and spec["pollingInterval"] > 0

    target = spec["scaleTargetRef"]
    assert target["name"] == deployment["metadata"]["name"]
    assert target.get("kind", "Deployment") == deployment["kind"]
    assert target.get("apiVersion", "apps/v1") == deployment["apiVersion"]

    fallback = spec["fallback"]  # both mandatory once the section is there
    assert set(fallback) <= {"failureThreshold", "replicas", "behavior"}
    assert is_int(fallback["failureThreshold"]) and fallback["failureThreshold"] > 0
    assert is_int(fallback["replicas"])
    assert spec["minReplicaCount"] <= fallback["replicas"] <= spec["maxReplicaCount"]
    assert set(spec["advanced"]) <= {
        "horizontalPodAutoscalerConfig",
        "restoreToOriginalReplicaCount",
        "scalingModifiers",
    }

    found = spec["triggers"]
    assert len(found) == 2 and len(triggers(scaled)) == 2, "two triggers, each named"
    for trigger in found:
        assert set(trigger) <= TRIGGER_FIELDS, set(trigger) - TRIGGER_FIELDS
        assert trigger["type"] == "prometheus"
        # KEDA's fallback covers AverageValue triggers in every release; Value ones from 2.18
        assert trigger.get("metricType", "AverageValue") == "AverageValue"
        meta = trigger["metadata"]
        assert set(meta) <= PROMETHEUS_PARAMETERS, set(meta) - PROMETHEUS_PARAMETERS
        assert {"serverAddress", "query", "threshold"} <= set(meta)
        for key, value in meta.items():  # KEDA's schema: a map of strings
            assert isinstance(value, str), (trigger["name"], key, value)
        assert float(meta["threshold"]) > 0
        address = urlsplit(meta["serverAddress"])
        assert address.scheme in ("http", "https") and address.netloc, meta["serverAddress"]


def test_the_deployment_validates_against_the_kubernetes_schemas(example):
    """As test_kubernetes.py checks the proxy's own manifests; strict, so a misspelt field
    fails as the API server would refuse it."""
    deployment = example["Deployment"]
    try:
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"Deployment {deployment['metadata']['name']}: {exc.message}")
    assert "replicas" not in deployment["spec"], "the HPA owns the count: an apply resets it"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (bootstrap,) = [v["value"] for v in container["env"] if v["name"] == "BOOTSTRAP_SERVERS"]
    services = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/services.yaml").read_text()))
    (service,) = [s for s in services if s["metadata"]["name"] == bootstrap.split(":")[0]]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert bootstrap == f"{service['metadata']['name']}:{ports['kafka']}", bootstrap


def test_the_autoscaler_keda_makes_of_it_validates_too(example):
    """KEDA hands ``advanced.horizontalPodAutoscalerConfig`` and each threshold (as a quantity)
    to the HorizontalPodAutoscaler it makes: checked there, with Kubernetes' schema."""
    scaled = example["ScaledObject"]
    spec = scaled["spec"]
    hpa_config = spec["advanced"]["horizontalPodAutoscalerConfig"]
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": hpa_config.get("name", f"keda-hpa-{scaled['metadata']['name']}")},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}
            | spec["scaleTargetRef"],
            "minReplicas": max(1, spec["minReplicaCount"]),
            "maxReplicas": spec["maxReplicaCount"],
            "behavior": hpa_config["behavior"],
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": f"s{i}-prometheus"},
                        "target": {
                            "type": t.get("metricType", "AverageValue"),
                            "averageValue": t["metadata"]["threshold"],
                        },
                    },
                }
                for i, t in enumerate(spec["triggers"])
            ],
        },
    }
    try:
        kubernetes_validate.validate(hpa, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"the HorizontalPodAutoscaler KEDA would make: {exc.message}")


# ---------------------------------------------------------------------- the queries


def selectors(query: str) -> list[tuple[str, dict[str, str]]]:
    """Each metric a query reads, with its label matchers (every one ``name{…}`` here)."""
    found = []
    for name, matchers in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", query):
        found.append((name, dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', matchers))))
    bare = re.sub(r"\{[^}]*\}", "", query)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", bare)) - PROMQL_WORDS
    assert words == {name for name, _ in found}, f"a metric read without matchers: {query}"
    return found


Led = tuple[int, int, float]  # lag, records acquired, oldest unacknowledged age (s)


def node(led: Mapping[PartitionLabels, Led]) -> NodeFigures:
    """A node's figures for the gauges, leading ``led`` (group, topic, partition) and nothing
    else: what node/holdings.py reads from its share-partition leaders."""
    in_flight: dict[tuple[str, str], int] = {}
    for (group, _, _), (_, acquired, _) in led.items():
        if acquired:
            in_flight[(group, ACQUIRED)] = in_flight.get((group, ACQUIRED), 0) + acquired
    return NodeFigures(
        groups_by_state={},
        partitions=len(led),
        partitions_led=len(led),
        sessions=0,
        live_nodes=2,
        groups_coordinated=0,
        generation=1,
        in_flight=in_flight,
        rebalances={},
        partitions_detail={
            key: {"lag": lag, "records": acquired, "batches": 1, "start_offset": 0}
            for key, (lag, acquired, _) in led.items()
        },
        oldest_waiting={},
        oldest_unacked_age={key: age for key, (_, _, age) in led.items()},
        log_cache_bytes=0,
        connections={},
        store_up=True,
        upstream_up=True,
        lease_held=True,
    )


def collected(figures: NodeFigures) -> list[Metric]:
    """The live gauges' families as the proxy serves them at a scrape."""
    return list(LiveState(lambda: figures).collect())


NODES = ("shareproxy-0.shareproxy-nodes:8080", "shareproxy-1.shareproxy-nodes:8080")
# One scrape of each node a minute; None: the node is not scraped (down). Each node exports
# only the share-partitions it leads, and a share-partition is led by one node at a time.
SCRAPES: list[tuple[Mapping[PartitionLabels, Led] | None, ...]] = [
    (  # 0m and 1m: node 0 leads orders' partitions 0 and 2 (and one of another group),
        # node 1 partition 1 and a partition of a second topic the group reads
        {
            ("orders", "orders", 0): (1200, 200, 40.0),
            ("orders", "orders", 2): (300, 100, 12.5),
            ("audit", "orders", 0): (9000, 0, 3600.0),
        },
        {("orders", "orders", 1): (2500, 500, 95.0), ("orders", "returns", 0): (0, 0, 0.0)},
    ),
    (
        {
            ("orders", "orders", 0): (1000, 200, 41.0),
            ("orders", "orders", 2): (300, 100, 13.0),
            ("audit", "orders", 0): (9000, 0, 3660.0),
        },
        {("orders", "orders", 1): (2600, 500, 96.0), ("orders", "returns", 0): (0, 0, 0.0)},
    ),
    (  # 2m: node 1 down; node 0 took partition 1 over (what node 1 had acquired is available
        # again) and loads the second topic's only once a consumer fetches it
        {
            ("orders", "orders", 0): (900, 200, 42.0),
            ("orders", "orders", 2): (300, 100, 14.0),
            ("orders", "orders", 1): (2700, 0, 156.0),
            ("audit", "orders", 0): (9000, 0, 3720.0),
        },
        None,
    ),
    (  # 3m: both nodes restarted: nothing of the group is loaded until a consumer fetches
        {("audit", "orders", 0): (9000, 0, 3780.0)},
        {},
    ),
]
# what each trigger's query must give then: records not yet acquired, and the oldest age
EXPECTED = {
    "records-waiting": [3200, 3100, 3600, 0],
    "oldest-unacked-age": [95, 96, 156, 0],
}


def input_series(scrapes: Iterable[tuple[Mapping[PartitionLabels, Led] | None, ...]]) -> list:
    """promtool's input series: every sample the nodes' collectors render at each scrape, with
    the target's labels; a series a scrape lacks (or a node not scraped) is stale from then."""
    scrapes = list(scrapes)
    values: dict[str, list[str]] = {}
    for minute, scrape in enumerate(scrapes):
        for instance, led in zip(NODES, scrape, strict=True):
            if led is None:
                continue
            for family in collected(node(led)):
                for sample in family.samples:
                    labels = {**sample.labels, "instance": instance, "job": "shareproxy"}
                    body = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
                    series = values.setdefault(f"{sample.name}{{{body}}}", ["_"] * len(scrapes))
                    series[minute] = repr(float(sample.value))
    for series in values.values():
        for minute in range(1, len(series)):
            if series[minute] == "_" and series[minute - 1] not in ("_", "stale"):
                series[minute] = "stale"
    return [{"series": s, "values": " ".join(v)} for s, v in sorted(values.items())]


def test_each_query_reads_only_metrics_and_labels_the_proxy_exports(example):
    """A metric renamed in the code fails here, as well as in promtool's run below."""
    figures = node({("orders", "orders", 0): (10, 5, 1.0)})
    families = [*REGISTRY.collect(), *collected(figures)]
    exported = {f.name for f in families} | {s.name for f in families for s in f.samples}
    labels = {s.name: set(s.labels) for f in families for s in f.samples}
    group = the_group(example["Deployment"])
    for name, trigger in triggers(example["ScaledObject"]).items():
        read = selectors(trigger["metadata"]["query"])
        assert read, name
        for metric, matchers in read:
            assert metric in exported, (name, metric)
            assert set(matchers) <= labels[metric], (name, metric, set(matchers))
            assert matchers.get("group") == group, f"{name}: {metric} not of group {group!r}"


def test_promtool_gives_each_query_the_value_meant_summed_over_two_nodes(example, tmp_path):
    """The queries as KEDA sends them, on series rendered by the proxy's own collector: a
    share-partition is counted once though every node exports, a node's series going stale
    when it is down drops nothing twice, and a group nothing is loaded of reads 0."""
    assert the_group(example["Deployment"]) == "orders", "SCRAPES is written for group orders"
    found = triggers(example["ScaledObject"])
    assert set(found) == set(EXPECTED)
    cases = [
        {
            "expr": " ".join(trigger["metadata"]["query"].split()),
            "eval_time": f"{minute}m",
            "exp_samples": [{"labels": "{}", "value": value}],
        }
        for name, trigger in found.items()
        for minute, value in enumerate(EXPECTED[name])
    ]
    unit = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": "the KEDA example's triggers on two proxy nodes",
                "interval": "1m",
                "input_series": input_series(SCRAPES),
                "promql_expr_test": cases,
            }
        ],
    }
    path = tmp_path / "keda_queries_test.yml"
    path.write_text(yaml.safe_dump(unit, sort_keys=False))
    _promtool("test", "rules", str(path))


def test_promtool_refuses_a_wrong_value(tmp_path):
    """The promtool run above can fail: a case expecting the double count does."""
    unit = {
        "rule_files": [],
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'x{instance="a"}', "values": "1"},
                    {"series": 'x{instance="b"}', "values": "1"},
                ],
                "promql_expr_test": [
                    {"expr": "sum(x)", "eval_time": "0m", "exp_samples": [{"value": 3}]}
                ],
            }
        ],
    }
    path = tmp_path / "wrong_test.yml"
    path.write_text(yaml.safe_dump(unit))
    with pytest.raises(AssertionError, match=r"got: \{\} 2E\+00"):
        _promtool("test", "rules", str(path))
