"""deploy/grafana's dashboard and deploy/prometheus's alert rules use only series the daemons export.

The names come from the exposition of an in-process controller (after some
admissions) and agent metrics registry, parsed with prometheus_client's parser;
every expression of the dashboard and the rules is checked against them, and
so are the labels its selectors name.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluicegate.agent.metrics import AgentMetrics
from sluicegate.controller.metrics import ControllerMetrics

from .exposition import Scrape
from .test_controller_metrics import Clock, build, settle, workload

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "sluicegate-dashboard.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yaml"

# Series names as PromQL sees them; Prometheus' own (up, absent's argument aside) are not ours to check.
_NAME = re.compile(r"\b(?:kueue|sluicegate|kubelet|process|python)_[A-Za-z0-9_:]*")
_SELECTOR = re.compile(r"\b((?:kueue|sluicegate|kubelet)_[A-Za-z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def exported() -> tuple[set[str], dict[str, set[str]]]:
    """(every series name a query can use, label names seen per series name)."""
    metrics, clock = ControllerMetrics(), Clock()
    m = build(metrics, clock)
    m.create_workload(workload("one", "1", priority=0))
    settle(m, clock)
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for registry in (metrics.registry, AgentMetrics().registry):
        scrape = Scrape.of(registry)
        names |= scrape.names()
        for sample in scrape.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return names, labels


def dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    out = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    out += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return out


def rule_expressions(rules: dict[str, Any]) -> list[str]:
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def unknown(expressions: list[str]) -> list[str]:
    names, labels = exported()
    problems: list[str] = []
    for expr in expressions:
        for name in _NAME.findall(expr):
            if name not in names:
                problems.append(f"{name} (in {expr!r}) is not exported")
        for name, matchers in _SELECTOR.findall(expr):
            seen = labels.get(name)
            for label in _MATCHER.findall(matchers):
                if seen is not None and label not in seen:
                    problems.append(f"{name} has no label {label!r} (has {sorted(seen)}; in {expr!r})")
    return problems


def test_the_dashboard_loads_and_uses_only_exported_series() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "sluicegate-overview"
    expressions = dashboard_expressions(dashboard)
    assert len(expressions) >= 15
    assert unknown(expressions) == []
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for wanted in ("kueue_pending_workloads", "kueue_admitted_workloads_total", "kueue_cluster_queue_resource_usage",
                   "kueue_cluster_queue_nominal_quota", "kueue_admission_wait_time_seconds_bucket",
                   "kueue_evicted_workloads_total", "kueue_preempted_workloads_total", "kubelet_evictions_total",
                   "kubelet_pod_start_duration_seconds_bucket"):
        assert any(wanted in e for e in expressions), wanted


def test_the_alert_rules_are_valid_yaml_and_use_only_exported_series() -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "SluicegateControllerDown", "SluicegateNoActiveController", "SluicegateStoreDegraded",
        "SluicegateNoAdmissionsWhilePendingGrows", "SluicegateEvictionsSpike", "SluicegateNodeNotReady",
        "SluicegateNodeStreamBehind", "SluicegateNodePressureEvictions", "SluicegateAgentDisconnected"}
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
    assert unknown(rule_expressions(rules)) == []


def test_a_misspelt_series_or_label_is_caught() -> None:
    assert unknown(['rate(kueue_admited_workloads_total[5m])', 'kueue_pending_workloads{queue="a"}']) == [
        "kueue_admited_workloads_total (in 'rate(kueue_admited_workloads_total[5m])') is not exported",
        "kueue_pending_workloads has no label 'queue' (has ['cluster_queue', 'replica_role', 'status']; "
        "in 'kueue_pending_workloads{queue=\"a\"}')"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed")
def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
