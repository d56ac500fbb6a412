"""Every metric a Grafana dashboard queries is one a running proxy exports at /metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
_NOT_METRICS = re.compile(
    r'"[^"]*"'  # label values
    r"|\{[^}]*\}"  # label matchers
    r"|\b(?:by|without|on|ignoring)\s*\([^)]*\)"  # grouping label lists
    r"|\[[^\]]*\]"  # range selectors
    r"|\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b"  # numbers
    r"|\$\w+"  # dashboard variables
)
_FUNCTION = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\(")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once label matchers,
    grouping clauses, ranges, literals and function names are taken out."""
    bare = _NOT_METRICS.sub(" ", expr)
    bare = _FUNCTION.sub(" ", bare)
    return set(_NAME.findall(bare))


def queries() -> list[tuple[str, str]]:
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                found.append((f"{path.name}: {panel['title']}", target["expr"]))
        for variable in dashboard["templating"]["list"]:
            found.append((f"{path.name}: ${variable['name']}", variable["definition"]))
    return found


def test_the_name_extraction_finds_selected_metrics_only():
    expr = (
        'histogram_quantile(0.99, sum by (le, api) (rate(a_bucket{job="x",api=~"S.*"}[5m]))) '
        '/ clamp_min(sum(rate(b_total{group="$group"}[1m])), 1e-9) + c'
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert metric_names('label_values(d_total{job="x"}, group)') == {"d_total", "group"}


def test_dashboards_query_only_metrics_the_proxy_exports(proxy):
    p = proxy()
    text = httpx.get(f"{p.admin_url}/metrics", timeout=10).text
    exported = {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES.get(family.type, ("",))
    }
    found = queries()
    assert len(found) >= 25, "the dashboards lost their panels"
    dashboards = {where.split(":")[0] for where, _ in found}
    assert dashboards == {"overview.json", "share-group.json"}
    for where, expr in found:
        if expr.startswith("label_values("):  # label_values(<selector>, <label>)
            expr = expr[len("label_values(") : expr.rindex(",")]
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        missing = names - exported
        assert not missing, f"{where}: {sorted(missing)} not exported by the proxy"
