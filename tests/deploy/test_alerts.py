"""The shipped alert rules (deploy/prometheus/alerts.yml): valid for Prometheus, their unit
tests (alerts_test.yml) pass under promtool, the compose stack's Prometheus loads them, every
metric they read is one the proxy serves, and the monitoring page's runbook covers each alert."""

from __future__ import annotations

import re

import yaml

from tests.support.deploy_tools import PROMETHEUS, ROOT
from tests.support.deploy_tools import promtool as _promtool

RULES = PROMETHEUS / "alerts.yml"


def test_promtool_checks_the_rules_and_the_config_that_loads_them():
    _promtool("check", "rules", RULES.name)
    _promtool("check", "config", "prometheus.yml")  # rule_files resolve


def test_promtool_unit_tests_of_the_rules_pass():
    tests = sorted(PROMETHEUS.glob("*_test.yml"))
    assert tests, "no rule unit tests in deploy/prometheus"
    _promtool("test", "rules", *(t.name for t in tests))


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_every_alert_is_unit_tested_and_in_the_runbook():
    alerts = {r["alert"] for r in _rules()}
    tested = {
        case["alertname"]
        for path in PROMETHEUS.glob("*_test.yml")
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts <= tested, alerts - tested
    page = (ROOT / "docs" / "operations" / "monitoring.md").read_text()
    section = page.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    assert alerts <= set(re.findall(r"`(\w+)`", section)), alerts


def test_the_rules_read_only_metrics_the_proxy_serves():
    """A metric misspelt in a rule would never fire: each name a rule reads is in the
    documented metrics table (a counter's ``_total`` included) or is Prometheus's own ``up``."""
    page = (ROOT / "docs" / "operations" / "monitoring.md").read_text()
    table = page.split("\n## Metrics\n", 1)[1].split("\n### ", 1)[0]
    served = set(re.findall(r"`([a-z_]+)`", table))
    for rule in _rules():
        expr = re.sub(r"\{[^}]*\}", "", rule["expr"])  # label matchers
        names = set(re.findall(r"\b(?:share|shareproxy)_[a-z_]+", expr))
        assert names or re.search(r"\bup\b", expr), rule["alert"]
        assert names <= served, (rule["alert"], names - served)


def test_the_compose_prometheus_mounts_the_rules_it_is_configured_with():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    volumes = compose["services"]["prometheus"]["volumes"]
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    for name in config["rule_files"]:
        assert f"./deploy/prometheus/{name}:/etc/prometheus/{name}:ro" in volumes, name
