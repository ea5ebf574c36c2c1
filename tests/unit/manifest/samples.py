"""Valid base documents for each kind, and a helper to break one field of them.

Every failing case in the tables starts from one of these valid documents
and changes exactly one thing, so the expected error is that one thing.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from sluicegate.manifest import FieldError, ManifestError, decode

KUEUE = "kueue.x-k8s.io/v1beta2"
KUEUE_V1BETA1 = "kueue.x-k8s.io/v1beta1"
OWN = "sluicegate.io/v1beta2"

Doc = dict[str, Any]


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Any = _Delete()

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def mutate(doc: Doc, path: str, value: Any) -> Doc:
    """A deep copy of ``doc`` with ``path`` (``spec.podSets[0].count``) set or deleted.

    Missing intermediate mappings are created, so a case can add a field
    the base document does not have.
    """
    out = copy.deepcopy(doc)
    tokens: list[str | int] = [
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _TOKEN.finditer(path)
    ]
    node: Any = out
    for tok in tokens[:-1]:
        if isinstance(tok, str) and tok not in node:
            node[tok] = {}
        node = node[tok]
    last = tokens[-1]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


def errors_of(doc: Doc) -> list[FieldError]:
    try:
        decode(doc, source="test.yaml#1")
    except ManifestError as exc:
        return list(exc.errors)
    raise AssertionError("document decoded without errors")


def resource_flavor() -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "on-demand"},
        "spec": {"nodeLabels": {"instance-type": "on-demand", "example.com/zone": "a"}},
    }


def cluster_queue() -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {
            "cohortName": "org",
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "on-demand",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "10", "borrowingLimit": "5", "lendingLimit": "2"},
                                {"name": "memory", "nominalQuota": "64Gi"},
                            ],
                        },
                        {
                            "name": "spot",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "20"},
                                {"name": "memory", "nominalQuota": "128Gi"},
                            ],
                        },
                    ],
                },
                {
                    "coveredResources": ["example.com/gpu"],
                    "flavors": [{"name": "a100", "resources": [{"name": "example.com/gpu", "nominalQuota": 4}]}],
                },
            ],
        },
    }


def cohort() -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {
            "parentName": "org",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "on-demand",
                            "resources": [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2", "lendingLimit": "1"}],
                        }
                    ],
                }
            ],
            "fairSharing": {"weight": "0.5"},
        },
    }


def local_queue() -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "user-queue", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }


def workload_priority_class() -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
        "description": "urgent jobs",
    }


def priority_class() -> Doc:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch-high"},
        "value": 100000,
        "globalDefault": False,
        "description": "important batch pods",
        "preemptionPolicy": "PreemptLowerPriority",
    }


def namespace() -> Doc:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}


def workload() -> Doc:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "workers",
                    "count": 4,
                    "template": {
                        "spec": {
                            "initContainers": [
                                {"name": "fetch", "command": ["fetch-data"], "resources": {"requests": {"cpu": "3"}}}
                            ],
                            "containers": [
                                {
                                    "name": "main",
                                    "command": ["python", "train.py"],
                                    "args": ["--epochs", "3"],
                                    "env": [{"name": "MODE", "value": "fast"}],
                                    "workingDir": "/srv/job",
                                    "resources": {
                                        "requests": {"cpu": "1", "memory": "1Gi"},
                                        "limits": {"cpu": "2", "memory": "2Gi"},
                                    },
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def workload_with_status() -> Doc:
    doc = workload()
    doc["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue team-a",
                "lastTransitionTime": "2024-05-01T12:00:00Z",
            }
        ],
        "admission": {
            "clusterQueue": "team-a",
            "podSetAssignments": [
                {
                    "name": "workers",
                    "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                    "resourceUsage": {"cpu": "12", "memory": "4Gi"},
                    "count": 4,
                }
            ],
        },
        "requeueState": {"count": 1, "requeueAt": "2024-05-01T12:05:00Z"},
        "reclaimablePods": [{"name": "workers", "count": 1}],
        "accumulatedPastExecutionTimeSeconds": 30,
    }
    return doc


def configuration() -> Doc:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "waitForPodsReady": {
            "timeout": "5m",
            "recoveryTimeout": "90s",
            "blockAdmission": True,
            "requeuingStrategy": {
                "timestamp": "Creation",
                "backoffLimitCount": 5,
                "backoffBaseSeconds": 10,
                "backoffMaxSeconds": 600,
            },
        },
        "integrations": {"labelKeysToCopy": ["team", "example.com/project"]},
    }
