"""Every validation rule, one broken field at a time, with the exact field path reported.

Each case starts from a valid document in ``samples`` and changes one field;
the decoder must report exactly the listed (path, message fragment) pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sluicegate.manifest import ManifestError, decode

from . import samples
from .samples import DELETE, KUEUE_V1BETA1, Doc, errors_of, mutate

Case = tuple[Callable[[], Doc], str, Any, list[tuple[str, str]]]

RG = "spec.resourceGroups"
CPU0 = f"{RG}[0].flavors[0].resources[0]"
POD = "spec.podSets[0].template.spec"
MAIN = f"{POD}.containers[0]"


def _groups(n: int) -> list[dict[str, Any]]:
    """n valid resource groups, each with its own resource and flavor."""
    return [
        {
            "coveredResources": [f"example.com/r{i}"],
            "flavors": [{"name": f"f{i}", "resources": [{"name": f"example.com/r{i}", "nominalQuota": 1}]}],
        }
        for i in range(n)
    ]


def _wide_group(n: int) -> list[dict[str, Any]]:
    names = [f"example.com/r{i}" for i in range(n)]
    return [{"coveredResources": names, "flavors": [{"name": "f", "resources": [{"name": r, "nominalQuota": 1} for r in names]}]}]


def _many_flavors(groups: int, per_group: int) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": [f"example.com/r{g}"],
            "flavors": [
                {"name": f"f{g}-{k}", "resources": [{"name": f"example.com/r{g}", "nominalQuota": 1}]}
                for k in range(per_group)
            ],
        }
        for g in range(groups)
    ]


CLUSTER_QUEUE_CASES = [
    pytest.param(RG, _groups(17), [(RG, "must list at most 16 item(s), got 17")], id="more-than-16-resource-groups"),
    pytest.param(
        RG, _many_flavors(16, 17), [(RG, "must list at most 256 flavors in all groups together, got 272")],
        id="more-than-256-flavors-in-total",
    ),
    pytest.param(
        f"{RG}[1]", {"coveredResources": [], "flavors": [{"name": "a100", "resources": []}]},
        [(f"{RG}[1].coveredResources", "must list at least 1 resource")], id="covered-resources-empty",
    ),
    pytest.param(
        f"{RG}[1].coveredResources", DELETE,
        [(f"{RG}[1].coveredResources", "required field is missing"),
         (f"{RG}[1].flavors[0].resources", "must list the 0 coveredResources () in the same order, got 1")],
        id="covered-resources-missing",
    ),
    pytest.param(
        RG, _wide_group(65), [(f"{RG}[0].coveredResources", "must list at most 64 resources, got 65")],
        id="more-than-64-covered-resources",
    ),
    pytest.param(
        f"{RG}[1].coveredResources[0]", "Bad Name!",
        [(f"{RG}[1].coveredResources[0]", "must be a qualified name"),
         (f"{RG}[1].flavors[0].resources[0].name", 'must be "Bad Name!" (coveredResources[0])')],
        id="covered-resource-not-a-qualified-name",
    ),
    pytest.param(
        f"{RG}[1].coveredResources", ["memory"],
        [(f"{RG}[1].coveredResources[0]", 'duplicate: "memory" is already covered by resourceGroups[0]'),
         (f"{RG}[1].flavors[0].resources[0].name", 'must be "memory" (coveredResources[0])')],
        id="resource-covered-by-two-groups",
    ),
    pytest.param(
        f"{RG}[0].coveredResources", ["cpu", "cpu"],
        [(f"{RG}[0].coveredResources[1]", 'duplicate: "cpu" is already covered by this group'),
         (f"{RG}[0].flavors[0].resources[1].name", 'must be "cpu" (coveredResources[1])'),
         (f"{RG}[0].flavors[1].resources[1].name", 'must be "cpu" (coveredResources[1])')],
        id="resource-covered-twice-in-a-group",
    ),
    pytest.param(
        f"{RG}[0].flavors[1].name", "on-demand",
        [(f"{RG}[0].flavors[1].name", 'duplicate: flavor "on-demand" is already listed in this group')],
        id="flavor-listed-twice-in-a-group",
    ),
    pytest.param(
        f"{RG}[1].flavors[0].name", "spot",
        [(f"{RG}[1].flavors[0].name", 'duplicate: flavor "spot" is already listed in resourceGroups[0]')],
        id="flavor-listed-in-two-groups",
    ),
    pytest.param(
        f"{RG}[0].flavors[0].name", "On_Demand",
        [(f"{RG}[0].flavors[0].name", 'must be a DNS-1123 subdomain')], id="flavor-name-not-dns",
    ),
    pytest.param(
        f"{RG}[0].flavors[0].resources", [{"name": "cpu", "nominalQuota": 1}],
        [(f"{RG}[0].flavors[0].resources", "must list the 2 coveredResources (cpu, memory) in the same order, got 1")],
        id="flavor-lists-fewer-resources",
    ),
    pytest.param(
        f"{RG}[0].flavors[1].resources",
        [{"name": "memory", "nominalQuota": "1Gi"}, {"name": "cpu", "nominalQuota": 1}],
        [(f"{RG}[0].flavors[1].resources[0].name", 'must be "cpu" (coveredResources[0])'),
         (f"{RG}[0].flavors[1].resources[1].name", 'must be "memory" (coveredResources[1])')],
        id="flavor-lists-resources-out-of-order",
    ),
    pytest.param(f"{CPU0}.nominalQuota", DELETE, [(f"{CPU0}.nominalQuota", "required field is missing")], id="nominal-quota-missing"),
    pytest.param(
        f"{RG}[0].flavors[1].resources[0].nominalQuota", -1,
        [(f"{RG}[0].flavors[1].resources[0].nominalQuota", 'must be non-negative, got "-1"')], id="nominal-quota-negative",
    ),
    pytest.param(
        f"{CPU0}.nominalQuota", "ten",
        [(f"{CPU0}.nominalQuota", 'not a valid quantity: "ten"')], id="nominal-quota-not-a-quantity",
    ),
    pytest.param(
        f"{CPU0}.nominalQuota", True,
        [(f"{CPU0}.nominalQuota", "must be a quantity such as 500m, 2, 1.5Gi or 256Mi, got true")], id="nominal-quota-boolean",
    ),
    pytest.param(
        f"{CPU0}.borrowingLimit", "-2", [(f"{CPU0}.borrowingLimit", 'must be non-negative, got "-2"')],
        id="borrowing-limit-negative",
    ),
    pytest.param(
        "spec.cohortName", DELETE,
        [(f"{CPU0}.borrowingLimit", 'must not be set when spec.cohortName is empty (there is no cohort to borrow from or lend to), got "5"'),
         (f"{CPU0}.lendingLimit", 'must not be set when spec.cohortName is empty (there is no cohort to borrow from or lend to), got "2"')],
        id="limits-without-cohort",
    ),
    pytest.param(
        f"{CPU0}.lendingLimit", "-1", [(f"{CPU0}.lendingLimit", 'must be non-negative, got "-1"')], id="lending-limit-negative",
    ),
    pytest.param(
        f"{CPU0}.lendingLimit", "10500m",
        [(f"{CPU0}.lendingLimit", 'must be at most the nominalQuota ("10"), got "10500m"')], id="lending-limit-above-nominal",
    ),
    pytest.param(
        f"{RG}[0].flavors[0].resources[1].lendingLimit", "64.5Gi",
        [(f"{RG}[0].flavors[0].resources[1].lendingLimit", 'must be at most the nominalQuota ("64Gi"), got "64.5Gi"')],
        id="lending-limit-above-nominal-memory",
    ),
    pytest.param(
        "spec.cohortName", "Org!", [("spec.cohortName", "must be a DNS-1123 subdomain")], id="cohort-name-not-dns",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]},
        [("spec.namespaceSelector.matchExpressions[0].operator", 'must be one of In, NotIn, Exists, DoesNotExist, got "Equals"')],
        id="selector-bad-operator",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchExpressions": [{"key": "team", "operator": "NotIn"}]},
        [("spec.namespaceSelector.matchExpressions[0].values", "must list at least one value when operator is NotIn")],
        id="selector-notin-without-values",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
        [("spec.namespaceSelector.matchExpressions[0].values", "must be empty when operator is Exists, got 1 value(s)")],
        id="selector-exists-with-values",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchExpressions": [{"operator": "Exists"}]},
        [("spec.namespaceSelector.matchExpressions[0].key", "required field is missing")], id="selector-key-missing",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchLabels": {"team": "a b"}},
        [("spec.namespaceSelector.matchLabels[team]", "must be a label value")], id="selector-bad-label-value",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchLabels": {"-team": "a"}},
        [("spec.namespaceSelector.matchLabels[-team]", "key must be a qualified name")], id="selector-bad-label-key",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchLabels": {"version": 2}},
        [("spec.namespaceSelector.matchLabels[version]", "must be a string, got 2 (quote the value in YAML)")],
        id="selector-unquoted-number",
    ),
    pytest.param(
        "spec.namespaceSelector", {"matchNames": ["a"]},
        [("spec.namespaceSelector.matchNames", 'unknown field; did you mean "matchLabels"?')], id="selector-unknown-field",
    ),
    pytest.param(
        "spec.queueingStrategy", "FIFO",
        [("spec.queueingStrategy", 'must be one of StrictFIFO, BestEffortFIFO, got "FIFO"')], id="queueing-strategy-invalid",
    ),
    pytest.param(
        "spec.preemption", {"withinClusterQueue": "Any"},
        [("spec.preemption.withinClusterQueue", 'must be one of Never, LowerPriority, LowerOrNewerEqualPriority, got "Any"')],
        id="within-cluster-queue-invalid",
    ),
    pytest.param(
        "spec.preemption", {"reclaimWithinCohort": "LowerOrNewerEqualPriority"},
        [("spec.preemption.reclaimWithinCohort", 'must be one of Never, LowerPriority, Any, got "LowerOrNewerEqualPriority"')],
        id="reclaim-within-cohort-invalid",
    ),
    pytest.param(
        "spec.preemption", {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Any"}},
        [("spec.preemption.borrowWithinCohort.policy", 'must be one of Never, LowerPriority, got "Any"')],
        id="borrow-within-cohort-policy-invalid",
    ),
    pytest.param(
        "spec.preemption", {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "high"}},
        [("spec.preemption.borrowWithinCohort.maxPriorityThreshold", 'must be an integer, got "high"')],
        id="max-priority-threshold-not-an-integer",
    ),
    pytest.param(
        "spec.preemption", {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
        [("spec.preemption", "reclaimWithinCohort=Never cannot be combined with borrowWithinCohort.policy=LowerPriority")],
        id="borrow-within-cohort-needs-reclaim",
    ),
    pytest.param(
        "spec.preemption", {"borrowWithinCohort": {"policy": "LowerPriority"}},
        [("spec.preemption", "reclaimWithinCohort=Never cannot be combined with borrowWithinCohort.policy=LowerPriority")],
        id="borrow-within-cohort-needs-reclaim-default",
    ),
    pytest.param(
        "spec.flavorFungibility", {"whenCanBorrow": "Maybe"},
        [("spec.flavorFungibility.whenCanBorrow", 'must be one of MayStopSearch, TryNextFlavor, got "Maybe"')],
        id="when-can-borrow-invalid",
    ),
    pytest.param(
        "spec.flavorFungibility", {"whenCanPreempt": "Preempt"},
        [("spec.flavorFungibility.whenCanPreempt", "Preempt is the kueue.x-k8s.io/v1beta1 spelling; kueue.x-k8s.io/v1beta2 calls it MayStopSearch")],
        id="v1beta1-fungibility-word-in-v1beta2",
    ),
    pytest.param(
        "spec.flavorFungibility", {"whenCanBorrow": "TryNextFlavor", "preference": "BorrowingOverPreemption"},
        [], id="preference-with-both-try-next-is-valid",
    ),
    pytest.param(
        "spec.flavorFungibility", {"whenCanPreempt": "TryNextFlavor", "preference": "BorrowingOverPreemption"},
        [("spec.flavorFungibility.preference", "may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor, got whenCanBorrow=MayStopSearch, whenCanPreempt=TryNextFlavor")],
        id="preference-needs-both-try-next",
    ),
    pytest.param(
        "spec.flavorFungibility", {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "Cheapest"},
        [("spec.flavorFungibility.preference", 'must be one of BorrowingOverPreemption, PreemptionOverBorrowing, got "Cheapest"')],
        id="preference-invalid",
    ),
    pytest.param(
        "spec.fairSharing", {"weight": "-1"}, [("spec.fairSharing.weight", 'must be non-negative, got "-1"')],
        id="fair-sharing-weight-negative",
    ),
    pytest.param(
        "spec.fairSharing", {"weight": "1n"}, [("spec.fairSharing.weight", 'must be 0 or greater than 1n (10^-9), got "1n"')],
        id="fair-sharing-weight-too-small",
    ),
    pytest.param(
        "spec.fairSharing", {"weight": "heavy"}, [("spec.fairSharing.weight", 'not a valid quantity: "heavy"')],
        id="fair-sharing-weight-not-a-quantity",
    ),
    pytest.param(
        "spec.stopPolicy", "Stop", [("spec.stopPolicy", 'must be one of None, Hold, HoldAndDrain, got "Stop"')],
        id="stop-policy-invalid",
    ),
    pytest.param(
        "spec.admissionChecks", ["prov"],
        [("spec.admissionChecks", "not supported: sluicegate has no AdmissionCheck controllers")], id="admission-checks-unsupported",
    ),
    pytest.param(
        "spec.admissionChecksStrategy", {"admissionChecks": [{"name": "prov"}]},
        [("spec.admissionChecksStrategy", "not supported: sluicegate has no AdmissionCheck controllers")],
        id="admission-checks-strategy-unsupported",
    ),
    pytest.param(
        "spec.admissionScope", {"admissionMode": "UsageBased"},
        [("spec.admissionScope.admissionMode",
          'must be one of UsageBasedAdmissionFairSharing, NoAdmissionScope, got "UsageBased"')],
        id="admission-mode-unknown",
    ),
    pytest.param(
        "spec.admissionScope", {},
        [("spec.admissionScope.admissionMode", "required field is missing")], id="admission-mode-missing",
    ),
    pytest.param(
        "spec.concurrentAdmissionPolicy", {"migration": {"mode": "TryPreferredFlavors"}},
        [("spec.concurrentAdmissionPolicy", "not supported: concurrent admission")], id="concurrent-admission-unsupported",
    ),
    pytest.param(
        "spec.topology", {"name": "default"}, [("spec.topology", "not supported: Topology Aware Scheduling")],
        id="topology-unsupported",
    ),
    pytest.param(
        "spec.cohort", "org", [("spec.cohort", "not supported: this is the kueue.x-k8s.io/v1beta1 spelling; v1beta2 calls it cohortName")],
        id="v1beta1-cohort-field-in-v1beta2",
    ),
    pytest.param(
        "spec.resourceGroup", [], [("spec.resourceGroup", 'unknown field; did you mean "resourceGroups"?')], id="typo-in-spec",
    ),
    pytest.param(
        f"{CPU0}.nominal", 1, [(f"{CPU0}.nominal", 'unknown field; did you mean "nominalQuota"?')], id="typo-deep-in-quota",
    ),
    pytest.param("status", {"pendingWorkloads": 0}, [("status", "not supported: status is computed by the controller")], id="status-not-accepted"),
    pytest.param("metadata.name", "Team_A", [("metadata.name", "must be a DNS-1123 subdomain")], id="name-not-dns"),
    pytest.param("metadata.name", DELETE, [("metadata.name", "required field is missing")], id="name-missing"),
    pytest.param(
        "metadata.namespace", "team-a",
        [("metadata.namespace", "ClusterQueue is cluster-scoped and takes no namespace; remove metadata.namespace")],
        id="namespace-on-cluster-scoped-kind",
    ),
    pytest.param(
        "metadata.finalizers", ["x"], [("metadata.finalizers", "not supported: sluicegate manages object lifetimes itself")],
        id="metadata-finalizers",
    ),
    pytest.param(
        "metadata.ownerReferences", [], [("metadata.ownerReferences", "not supported")], id="metadata-owner-references",
    ),
    pytest.param("metadata.clusterName", "x", [("metadata.clusterName", "unknown field")], id="metadata-unknown-field"),
    pytest.param(
        "metadata.labels", {"team": "a/b"}, [("metadata.labels[team]", "must be a label value")], id="metadata-bad-label",
    ),
    pytest.param(
        "metadata.creationTimestamp", "yesterday",
        [("metadata.creationTimestamp", "'yesterday' is not an RFC 3339 timestamp")], id="metadata-bad-timestamp",
    ),
]


@pytest.mark.parametrize(("path", "value", "expected"), CLUSTER_QUEUE_CASES)
def test_cluster_queue_rules(path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(samples.cluster_queue, path, value, expected)


def test_v1beta1_cluster_queue_rejects_cohort_name() -> None:
    doc = samples.cluster_queue()
    doc["apiVersion"] = KUEUE_V1BETA1
    no_cohort = "must not be set when spec.cohort is empty (there is no cohort to borrow from or lend to)"
    assert [(e.path, e.message) for e in errors_of(doc)] == [
        ("spec.cohortName", "not supported: this is the v1beta2 spelling; kueue.x-k8s.io/v1beta1 calls it cohort"),
        (f"{CPU0}.borrowingLimit", f'{no_cohort}, got "5"'),
        (f"{CPU0}.lendingLimit", f'{no_cohort}, got "2"'),
    ]


CO0 = f"{RG}[0].flavors[0].resources[0]"
COHORT_CASES = [
    pytest.param("spec.parentName", "research", [("spec.parentName", 'a cohort cannot be its own parent, got "research"')], id="own-parent"),
    pytest.param(
        "spec.parentName", DELETE,
        [(f"{CO0}.borrowingLimit", 'must not be set when spec.parentName is empty (a root cohort has no parent to borrow from or lend to), got "2"'),
         (f"{CO0}.lendingLimit", 'must not be set when spec.parentName is empty (a root cohort has no parent to borrow from or lend to), got "1"')],
        id="limits-without-parent",
    ),
    pytest.param(f"{CO0}.nominalQuota", "-4", [(f"{CO0}.nominalQuota", 'must be non-negative, got "-4"')], id="nominal-negative"),
    pytest.param(f"{CO0}.nominalQuota", DELETE, [(f"{CO0}.nominalQuota", "required field is missing")], id="nominal-missing"),
    pytest.param(
        RG, [*_groups(1), *_groups(1)],
        [(f"{RG}[1].coveredResources[0]", 'duplicate: "example.com/r0" is already covered by resourceGroups[0]'),
         (f"{RG}[1].flavors[0].name", 'duplicate: flavor "f0" is already listed in resourceGroups[0]')],
        id="same-structural-rules-as-cluster-queues",
    ),
    pytest.param(RG, _groups(17), [(RG, "must list at most 16 item(s), got 17")], id="more-than-16-groups"),
    pytest.param("spec.fairSharing.weight", "-0.5", [("spec.fairSharing.weight", 'must be non-negative, got "-0.5"')], id="weight-negative"),
    pytest.param("spec.parentName", "Org", [("spec.parentName", "must be a DNS-1123 subdomain")], id="parent-not-dns"),
    pytest.param("spec.parent", "org", [("spec.parent", "not supported: this is the old spelling; v1beta2 calls it parentName")], id="old-parent-spelling"),
    pytest.param("spec.cohortName", "org", [("spec.cohortName", 'unknown field; did you mean "parentName"?')], id="cluster-queue-field-on-cohort"),
]


@pytest.mark.parametrize(("path", "value", "expected"), COHORT_CASES)
def test_cohort_rules(path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(samples.cohort, path, value, expected)


OTHER_KIND_CASES = [
    pytest.param(samples.resource_flavor, "spec.nodeLabels", {"Bad Key": "x"}, [("spec.nodeLabels[Bad Key]", "key must be a qualified name")], id="flavor-node-label-key"),
    pytest.param(samples.resource_flavor, "spec.nodeLabels", {"zone": "a,b"}, [("spec.nodeLabels[zone]", "must be a label value")], id="flavor-node-label-value"),
    pytest.param(
        samples.resource_flavor, "spec.nodeLabels", {f"k{i}": "v" for i in range(9)},
        [("spec.nodeLabels", "must have at most 8 entries, got 9")], id="flavor-more-than-8-node-labels",
    ),
    pytest.param(samples.resource_flavor, "spec.nodeTaints", [{"key": "spot", "effect": "NoRun"}], [("spec.nodeTaints[0].effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute")], id="flavor-node-taint-effect"),
    pytest.param(samples.resource_flavor, "spec.tolerations", [{"operator": "Equal"}], [("spec.tolerations[0].operator", "must be Exists when key is empty")], id="flavor-toleration-empty-key"),
    pytest.param(samples.local_queue, "spec.clusterQueue", DELETE, [("spec.clusterQueue", "required field is missing")], id="local-queue-cluster-queue-missing"),
    pytest.param(samples.local_queue, "spec", DELETE, [("spec", "required field is missing")], id="local-queue-spec-missing"),
    pytest.param(samples.local_queue, "spec.clusterQueue", "", [("spec.clusterQueue", "required field is empty")], id="local-queue-cluster-queue-empty"),
    pytest.param(samples.local_queue, "spec.stopPolicy", "Drain", [("spec.stopPolicy", 'must be one of None, Hold, HoldAndDrain, got "Drain"')], id="local-queue-stop-policy"),
    pytest.param(samples.local_queue, "spec.fairSharing", {"weight": "-1"}, [("spec.fairSharing.weight", 'must be non-negative, got "-1"')], id="local-queue-fair-sharing-negative"),
    pytest.param(samples.local_queue, "spec.fairSharing", {"wieght": 1}, [("spec.fairSharing.wieght", "unknown field")], id="local-queue-fair-sharing-typo"),
    pytest.param(samples.local_queue, "status", {"pendingWorkloads": 1}, [("status.pendingWorkloads", "not supported: status is computed")], id="local-queue-computed-status"),
    pytest.param(samples.local_queue, "status", {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {"cpu": "-1"}, "lastUpdate": "2025-06-03T14:25:15Z"}}}, [("status.fairSharing.admissionFairSharingStatus.consumedResources.cpu", 'must be non-negative, got "-1"')], id="local-queue-afs-negative"),
    pytest.param(samples.local_queue, "status", {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {}}}}, [("status.fairSharing.admissionFairSharingStatus.lastUpdate", "required field is missing")], id="local-queue-afs-last-update-missing"),
    pytest.param(samples.local_queue, "metadata.namespace", "team.a", [("metadata.namespace", "must be a DNS-1123 label")], id="local-queue-namespace-not-a-label"),
    pytest.param(samples.workload_priority_class, "value", DELETE, [("value", "required field is missing")], id="wpc-value-missing"),
    pytest.param(samples.workload_priority_class, "value", 2**31, [("value", "must be at most 2147483647, got 2147483648")], id="wpc-value-beyond-int32"),
    pytest.param(samples.workload_priority_class, "value", "high", [("value", 'must be an integer, got "high"')], id="wpc-value-not-an-integer"),
    pytest.param(samples.workload_priority_class, "description", "x" * 2049, [("description", "must be at most 2048 characters, got 2049")], id="wpc-description-too-long"),
    pytest.param(samples.workload_priority_class, "spec", {"value": 1}, [("spec", "unknown field")], id="wpc-has-no-spec"),
    pytest.param(samples.priority_class, "value", 1_000_000_001, [("value", "must be at most 1000000000 (higher values are reserved")], id="pc-value-above-user-range"),
    pytest.param(samples.priority_class, "metadata.name", "system-custom", [("metadata.name", "names starting with system- are reserved")], id="pc-system-prefix-reserved"),
    pytest.param(samples.priority_class, "preemptionPolicy", "Always", [("preemptionPolicy", 'must be one of PreemptLowerPriority, Never, got "Always"')], id="pc-preemption-policy"),
    pytest.param(samples.priority_class, "globalDefault", "yes", [("globalDefault", 'must be true or false, got "yes"')], id="pc-global-default-not-bool"),
    pytest.param(samples.namespace, "metadata.name", "team.a", [("metadata.name", "must be a DNS-1123 label")], id="namespace-name-not-a-label"),
    pytest.param(samples.namespace, "spec", {"finalizers": ["kubernetes"]}, [("spec", "not supported: only a namespace's labels matter here")], id="namespace-spec"),
]


@pytest.mark.parametrize(("base", "path", "value", "expected"), OTHER_KIND_CASES)
def test_other_kind_rules(base: Callable[[], Doc], path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(base, path, value, expected)


def test_builtin_priority_class_value_is_fixed() -> None:
    doc = mutate(mutate(samples.priority_class(), "metadata.name", "system-node-critical"), "value", 5)
    assert [(e.path, e.message) for e in errors_of(doc)] == [
        ("value", "system-node-critical is built in with value 2000001000, got 5")
    ]


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "command": ["true"], **fields}


WORKLOAD_CASES = [
    pytest.param(samples.workload, "spec.queueName", DELETE, [("spec.queueName", "required field is missing")], id="queue-name-missing"),
    pytest.param(samples.workload, "spec.queueName", "Team Queue", [("spec.queueName", "must be a DNS-1123 subdomain")], id="queue-name-not-dns"),
    pytest.param(samples.workload, "spec", DELETE, [("spec", "required field is missing")], id="spec-missing"),
    pytest.param(samples.workload, "spec.podSets", [], [("spec.podSets", "must list at least 1 item(s), got 0")], id="no-pod-sets"),
    pytest.param(samples.workload, "spec.podSets", DELETE, [("spec.podSets", "required field is missing")], id="pod-sets-missing"),
    pytest.param(
        samples.workload, "spec.podSets",
        [{"name": f"p{i}", "template": {"spec": {"containers": [_container()]}}} for i in range(9)],
        [("spec.podSets", "must list at most 8 item(s), got 9")], id="more-than-8-pod-sets",
    ),
    pytest.param(
        samples.workload, "spec.podSets",
        [{"template": {"spec": {"containers": [_container()]}}}, {"template": {"spec": {"containers": [_container()]}}}],
        [("spec.podSets[1].name", 'duplicate: podSets[0] is already named "main"')], id="duplicate-default-pod-set-names",
    ),
    pytest.param(samples.workload, "spec.podSets[0].name", "Workers", [("spec.podSets[0].name", "must be a DNS-1123 label")], id="pod-set-name-not-a-label"),
    pytest.param(samples.workload, "spec.podSets[0].count", -1, [("spec.podSets[0].count", "must be non-negative, got -1")], id="count-negative"),
    pytest.param(samples.workload, "spec.podSets[0].count", 2.5, [("spec.podSets[0].count", "must be an integer, got 2.5")], id="count-not-an-integer"),
    pytest.param(samples.workload, "spec.podSets[0].minCount", 0, [("spec.podSets[0].minCount", "must be at least 1, got 0")], id="min-count-zero"),
    pytest.param(samples.workload, "spec.podSets[0].minCount", 5, [("spec.podSets[0].minCount", "must be at most count (4), got 5")], id="min-count-above-count"),
    pytest.param(
        samples.workload, "spec.podSets",
        [{"name": n, "count": 3, "minCount": 2, "template": {"spec": {"containers": [_container()]}}} for n in ("a", "b")],
        [("spec.podSets", "at most one podSet may set minCount (partial admission), got 2")], id="two-pod-sets-with-min-count",
    ),
    pytest.param(samples.workload, "spec.podSets[0].template", DELETE, [("spec.podSets[0].template", "required field is missing")], id="template-missing"),
    pytest.param(samples.workload, "spec.podSets[0].template.metadata", {"name": "x"}, [("spec.podSets[0].template.metadata.name", "unknown field; expected one of: annotations, labels")], id="template-metadata-name"),
    pytest.param(samples.workload, "spec.podSets[0].template.metadata", {"labels": {"a": "b c"}}, [("spec.podSets[0].template.metadata.labels[a]", "must be a label value")], id="template-label-value"),
    pytest.param(samples.workload, f"{POD}.containers", [], [(f"{POD}.containers", "must list at least 1 item(s), got 0")], id="no-containers"),
    pytest.param(samples.workload, f"{POD}.containers", DELETE, [(f"{POD}.containers", "required field is missing")], id="containers-missing"),
    pytest.param(samples.workload, f"{MAIN}.name", DELETE, [(f"{MAIN}.name", "required field is missing")], id="container-name-missing"),
    pytest.param(samples.workload, f"{MAIN}.name", "Main", [(f"{MAIN}.name", "must be a DNS-1123 label")], id="container-name-not-a-label"),
    pytest.param(
        samples.workload, f"{MAIN}.name", "fetch",
        [(f"{MAIN}.name", f'duplicate: {POD}.initContainers[0] already uses the name "fetch"')], id="container-name-shared-with-init-container",
    ),
    pytest.param(
        samples.workload, f"{POD}.containers", [_container(), _container()],
        [(f"{POD}.containers[1].name", f'duplicate: {POD}.containers[0] already uses the name "c"')], id="duplicate-container-names",
    ),
    pytest.param(
        samples.workload, f"{MAIN}.image", "python:3.11",
        [(f"{MAIN}.image", "not supported: sluicegate runs processes, not container images")], id="container-image",
    ),
    pytest.param(samples.workload, f"{MAIN}.ports", [{"containerPort": 80}], [(f"{MAIN}.ports", "not supported: processes share the node's network")], id="container-ports"),
    pytest.param(samples.workload, f"{MAIN}.livenessProbe", {}, [(f"{MAIN}.livenessProbe", "not supported: probes are not implemented")], id="container-probe"),
    pytest.param(samples.workload, f"{MAIN}.command", "python train.py", [(f"{MAIN}.command", 'must be a list, got "python train.py"')], id="command-not-a-list"),
    pytest.param(samples.workload, f"{MAIN}.args", ["--epochs", 3], [(f"{MAIN}.args[1]", "must be a string, got 3 (quote the value in YAML)")], id="args-not-strings"),
    pytest.param(samples.workload, f"{MAIN}.env[0].valueFrom", {"secretKeyRef": {}}, [(f"{MAIN}.env[0].valueFrom", "not supported: there are no ConfigMaps, Secrets or downward API")], id="env-value-from"),
    pytest.param(samples.workload, f"{MAIN}.env[0].name", DELETE, [(f"{MAIN}.env[0].name", "required field is missing")], id="env-name-missing"),
    pytest.param(samples.workload, f"{MAIN}.env[0].value", 3, [(f"{MAIN}.env[0].value", "must be a string, got 3")], id="env-value-not-a-string"),
    pytest.param(samples.workload, f"{MAIN}.envFrom", [], [(f"{MAIN}.envFrom", "not supported")], id="env-from"),
    pytest.param(samples.workload, f"{MAIN}.workingDir", ["/srv"], [(f"{MAIN}.workingDir", "must be a string, got a list")], id="working-dir-not-a-string"),
    pytest.param(
        samples.workload, f"{MAIN}.resources.requests.pods", 1,
        [(f"{MAIN}.resources.requests[pods]", "the resource name pods is reserved")], id="pods-requested",
    ),
    pytest.param(
        samples.workload, f"{MAIN}.resources.limits.pods", 1,
        [(f"{MAIN}.resources.limits[pods]", "the resource name pods is reserved")], id="pods-limited",
    ),
    pytest.param(
        samples.workload, f"{MAIN}.resources.requests.cpu", "2500m",
        [(f"{MAIN}.resources.requests[cpu]", 'must not exceed the limit ("2"), got "2500m"')], id="request-above-limit",
    ),
    pytest.param(
        samples.workload, f"{MAIN}.resources.requests.cpus", "1",
        [(f"{MAIN}.resources.requests[cpus]", "resource name must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed")],
        id="unknown-unprefixed-resource",
    ),
    pytest.param(samples.workload, f"{MAIN}.resources.requests.memory", "1GB!", [(f"{MAIN}.resources.requests[memory]", 'not a valid quantity: "1GB!"')], id="bad-quantity"),
    pytest.param(samples.workload, f"{MAIN}.resources.requests.memory", "-1Gi", [(f"{MAIN}.resources.requests[memory]", 'must be non-negative, got "-1Gi"')], id="negative-request"),
    pytest.param(samples.workload, f"{MAIN}.resources.claims", [], [(f"{MAIN}.resources.claims", "not supported: dynamic resource allocation")], id="resource-claims"),
    pytest.param(samples.workload, f"{POD}.nodeSelector", {"disk": "ssd/fast"}, [(f"{POD}.nodeSelector[disk]", "must be a label value")], id="node-selector-value"),
    pytest.param(
        samples.workload, f"{POD}.restartPolicy", "Always",
        [(f"{POD}.restartPolicy", "Always is not valid for a batch pod, whose processes must run to completion; use Never or OnFailure")],
        id="restart-policy-always",
    ),
    pytest.param(samples.workload, f"{POD}.restartPolicy", "Sometimes", [(f"{POD}.restartPolicy", 'must be one of Never, OnFailure, got "Sometimes"')], id="restart-policy-invalid"),
    pytest.param(samples.workload, f"{POD}.terminationGracePeriodSeconds", -5, [(f"{POD}.terminationGracePeriodSeconds", "must be non-negative, got -5")], id="grace-period-negative"),
    pytest.param(samples.workload, f"{POD}.priority", 100, [(f"{POD}.priority", "not supported: the value comes from priorityClassName")], id="pod-priority"),
    pytest.param(samples.workload, f"{POD}.volumes", [], [(f"{POD}.volumes", "not supported")], id="pod-volumes"),
    pytest.param(samples.workload, f"{POD}.priorityClassName", "High", [(f"{POD}.priorityClassName", "must be a DNS-1123 subdomain")], id="pod-priority-class-name"),
    pytest.param(
        samples.workload, "spec.priorityClassRef", {"group": "example.com", "kind": "PriorityClass", "name": "x"},
        [("spec.priorityClassRef.group", 'must be one of kueue.x-k8s.io, scheduling.k8s.io, got "example.com"')], id="priority-ref-bad-group",
    ),
    pytest.param(
        samples.workload, "spec.priorityClassRef", {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "x"},
        [("spec.priorityClassRef.kind", 'must be WorkloadPriorityClass for group kueue.x-k8s.io, got "PriorityClass"')], id="priority-ref-kind-mismatch",
    ),
    pytest.param(
        samples.workload, "spec.priorityClassRef", {"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "x"},
        [("spec.priorityClassRef.kind", 'must be PriorityClass for group scheduling.k8s.io, got "WorkloadPriorityClass"')], id="priority-ref-kind-mismatch-pod",
    ),
    pytest.param(
        samples.workload, "spec.priorityClassRef", {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"},
        [("spec.priorityClassRef.name", "required field is missing")], id="priority-ref-name-missing",
    ),
    pytest.param(
        samples.workload, "spec.priorityClassName", "high",
        [("spec.priorityClassSource", "required with priorityClassName")], id="priority-class-name-without-source",
    ),
    pytest.param(
        samples.workload, "spec.priorityClassSource", "kueue.x-k8s.io/workloadpriorityclass",
        [("spec.priorityClassName", "required with priorityClassSource")], id="priority-class-source-without-name",
    ),
    pytest.param(samples.workload, "spec.priority", "high", [("spec.priority", 'must be an integer, got "high"')], id="priority-not-an-integer"),
    pytest.param(samples.workload, "spec.active", "false", [("spec.active", 'must be true or false, got "false"')], id="active-not-a-boolean"),
    pytest.param(samples.workload, "spec.maximumExecutionTimeSeconds", 0, [("spec.maximumExecutionTimeSeconds", "must be at least 1, got 0")], id="max-execution-time-zero"),
    pytest.param(samples.workload, "metadata.namespace", "Team", [("metadata.namespace", "must be a DNS-1123 label")], id="namespace-not-a-label"),
    pytest.param(samples.workload, "metadata.generateName", "train-", [("metadata.generateName", "not supported: only creation draws a name")], id="generate-name"),
]


@pytest.mark.parametrize(("base", "path", "value", "expected"), WORKLOAD_CASES)
def test_workload_rules(base: Callable[[], Doc], path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(base, path, value, expected)


def test_priority_class_ref_and_name_together() -> None:
    doc = samples.workload()
    doc["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    doc["spec"]["priorityClassName"] = "high"
    doc["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    assert [(e.path, e.message) for e in errors_of(doc)] == [
        ("spec.priorityClassName", "set priorityClassRef or priorityClassName/priorityClassSource, not both")
    ]


PSA = "status.admission.podSetAssignments[0]"
STATUS_CASES = [
    pytest.param("status.conditions[0].status", "Yes", [("status.conditions[0].status", 'must be one of True, False, Unknown, got "Yes"')], id="condition-status"),
    pytest.param("status.conditions[0].type", DELETE, [("status.conditions[0].type", "required field is missing")], id="condition-type-missing"),
    pytest.param("status.conditions[0].lastTransitionTime", DELETE, [("status.conditions[0].lastTransitionTime", "required field is missing")], id="condition-time-missing"),
    pytest.param("status.conditions[0].lastTransitionTime", "2024-13-01T00:00:00Z", [("status.conditions[0].lastTransitionTime", "is not a real calendar date")], id="condition-time-invalid"),
    pytest.param("status.conditions[0].reason", "quota reserved", [("status.conditions[0].reason", "must be a CamelCase word")], id="condition-reason"),
    pytest.param("status.conditions[0].observedGeneration", 1, [("status.conditions[0].observedGeneration", "not supported")], id="condition-observed-generation"),
    pytest.param(
        "status.conditions",
        [samples.workload_with_status()["status"]["conditions"][0],
         {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "", "lastTransitionTime": "2024-05-01T12:00:00Z"}],
        [("status.conditions[1].type", 'duplicate: conditions[0] already has type "QuotaReserved"')], id="condition-duplicate-type",
    ),
    pytest.param("status.admission.clusterQueue", DELETE, [("status.admission.clusterQueue", "required field is missing")], id="admission-cluster-queue-missing"),
    pytest.param(f"{PSA}.name", "driver", [(f"{PSA}.name", 'must name one of spec.podSets (workers), got "driver"')], id="assignment-unknown-pod-set"),
    pytest.param(f"{PSA}.count", -1, [(f"{PSA}.count", "must be non-negative, got -1")], id="assignment-count-negative"),
    pytest.param(f"{PSA}.resourceUsage.memory", "4097", [(f"{PSA}.resourceUsage[memory]", 'must be a multiple of count (4), got "4097"')], id="assignment-usage-not-a-multiple"),
    pytest.param(f"{PSA}.resourceUsage.cpu", "-4", [(f"{PSA}.resourceUsage[cpu]", 'must be non-negative, got "-4"')], id="assignment-usage-negative"),
    pytest.param(f"{PSA}.flavors.cpu", "On Demand", [(f"{PSA}.flavors[cpu]", "must be a DNS-1123 subdomain")], id="assignment-flavor-name"),
    pytest.param(
        "status.admission.podSetAssignments", [],
        [("status.admission.podSetAssignments", "must have one entry per podSet (1) while QuotaReserved is True, got 0")],
        id="assignments-must-cover-pod-sets",
    ),
    pytest.param("status.reclaimablePods[0].name", "driver", [("status.reclaimablePods[0].name", 'must name one of spec.podSets (workers), got "driver"')], id="reclaimable-unknown-pod-set"),
    pytest.param("status.reclaimablePods[0].count", 5, [("status.reclaimablePods[0].count", "must be at most the podSet's count (4), got 5")], id="reclaimable-above-count"),
    pytest.param("status.reclaimablePods[0].count", DELETE, [("status.reclaimablePods[0].count", "required field is missing")], id="reclaimable-count-missing"),
    pytest.param("status.requeueState.count", -1, [("status.requeueState.count", "must be non-negative, got -1")], id="requeue-count-negative"),
    pytest.param("status.requeueState.requeueAt", "soon", [("status.requeueState.requeueAt", "'soon' is not an RFC 3339 timestamp")], id="requeue-at-invalid"),
    pytest.param("status.accumulatedPastExecutionTimeSeconds", -3, [("status.accumulatedPastExecutionTimeSeconds", "must be non-negative, got -3")], id="accumulated-negative"),
    pytest.param(
        "status.accumulatedPastExexcutionTimeSeconds", 3,
        [("status.accumulatedPastExexcutionTimeSeconds", "not supported: kueue.x-k8s.io/v1beta2 spells it accumulatedPastExecutionTimeSeconds")],
        id="v1beta1-misspelling-in-v1beta2",
    ),
    pytest.param("status.extra", {"pods": []}, [("status.extra", "not supported: a sluicegate extension, only read with apiVersion sluicegate.io/v1beta2")], id="extra-needs-own-api-version"),
    pytest.param("status.admissionChecks", [], [("status.admissionChecks", "not supported")], id="status-admission-checks"),
]


@pytest.mark.parametrize(("path", "value", "expected"), STATUS_CASES)
def test_workload_status_rules(path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(samples.workload_with_status, path, value, expected)


CONFIG_CASES = [
    pytest.param("fairSharing.preemptionStrategies", ["Newest"], [("fairSharing.preemptionStrategies[0]", 'must be one of LessThanOrEqualToFinalShare, LessThanInitialShare, got "Newest"')], id="strategy-unknown"),
    pytest.param(
        "fairSharing.preemptionStrategies", ["LessThanInitialShare", "LessThanOrEqualToFinalShare"],
        [("fairSharing.preemptionStrategies", "must be one of [LessThanOrEqualToFinalShare]; [LessThanInitialShare]; [LessThanOrEqualToFinalShare, LessThanInitialShare], got [LessThanInitialShare, LessThanOrEqualToFinalShare]")],
        id="strategies-in-an-unsupported-order",
    ),
    pytest.param("fairSharing.enable", True, [("fairSharing.enable", "not supported: config.kueue.x-k8s.io/v1beta2 has no enable flag")], id="v1beta2-has-no-enable-flag"),
    pytest.param("waitForPodsReady.timeout", DELETE, [("waitForPodsReady.timeout", "required field is missing")], id="timeout-required-in-v1beta2"),
    pytest.param("waitForPodsReady.timeout", "5 minutes", [("waitForPodsReady.timeout", "'5 minutes' is not a duration")], id="timeout-not-a-duration"),
    pytest.param("waitForPodsReady.timeout", 300, [("waitForPodsReady.timeout", 'must be a duration string such as "5m"')], id="timeout-a-bare-number"),
    pytest.param("waitForPodsReady.timeout", "-1m", [("waitForPodsReady.timeout", 'must be non-negative, got "-1m"')], id="timeout-negative"),
    pytest.param("waitForPodsReady.timeout", "0s", [("waitForPodsReady.timeout", "must be positive")], id="timeout-zero"),
    pytest.param("waitForPodsReady.recoveryTimeout", "-30s", [("waitForPodsReady.recoveryTimeout", 'must be non-negative, got "-30s"')], id="recovery-timeout-negative"),
    pytest.param("waitForPodsReady.blockAdmission", "true", [("waitForPodsReady.blockAdmission", 'must be true or false, got "true"')], id="block-admission-not-a-boolean"),
    pytest.param("waitForPodsReady.requeuingStrategy.timestamp", "Admission", [("waitForPodsReady.requeuingStrategy.timestamp", 'must be one of Eviction, Creation, got "Admission"')], id="requeue-timestamp"),
    pytest.param("waitForPodsReady.requeuingStrategy.backoffLimitCount", -1, [("waitForPodsReady.requeuingStrategy.backoffLimitCount", "must be non-negative, got -1")], id="backoff-limit-negative"),
    pytest.param("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", -1, [("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "must be non-negative, got -1")], id="backoff-base-negative"),
    pytest.param("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", 1.5, [("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", "must be an integer, got 1.5")], id="backoff-max-fraction"),
    pytest.param("waitForPodsReady.unscheduledTimeout", "1m", [("waitForPodsReady.unscheduledTimeout", "not supported")], id="unscheduled-timeout"),
    pytest.param("integrations.labelKeysToCopy", ["ok", "not ok"], [("integrations.labelKeysToCopy[1]", "must be a qualified name")], id="label-key-to-copy-invalid"),
    pytest.param("integrations.labelKeysToCopy", ["a", "a"], [("integrations.labelKeysToCopy[1]", 'duplicate: "a" is listed twice')], id="label-key-to-copy-duplicate"),
    pytest.param("integrations.frameworkz", [], [("integrations.frameworkz", 'unknown field; did you mean "frameworks"?')], id="integrations-typo"),
    pytest.param("multiKueue", {}, [("multiKueue", "not supported: MultiKueue is not implemented")], id="multikueue"),
    pytest.param("featureGates", {"PartialAdmission": True}, [("featureGates", "not supported: sluicegate has no Kueue feature gates")], id="feature-gates"),
    pytest.param("resources", {"excludeResourcePrefixes": ["x"]}, [("resources", "not supported: resource exclusion and transformation")], id="resources"),
    pytest.param("admissionFairSharing", {"usageHalfLifeTime": "-1h"}, [("admissionFairSharing.usageHalfLifeTime", 'must be non-negative, got "-1h"')], id="afs-half-life-negative"),
    pytest.param("admissionFairSharing", {"usageSamplingInterval": "0s"}, [("admissionFairSharing.usageSamplingInterval", "must be greater than 0")], id="afs-sampling-zero"),
    pytest.param("admissionFairSharing", {"resourceWeights": {"cpu": -2}}, [("admissionFairSharing.resourceWeights[cpu]", "must be non-negative, got -2")], id="afs-weight-negative"),
    pytest.param("admissionFairSharing", {"resourceWeights": {"cpu": "2"}}, [("admissionFairSharing.resourceWeights[cpu]", 'must be a number, got "2"')], id="afs-weight-not-a-number"),
    pytest.param("admissionFairSharing", {"usageHalfLife": "1h"}, [("admissionFairSharing.usageHalfLife", "unknown field")], id="afs-typo"),
    pytest.param("metadata", {"name": "cfg"}, [("metadata", "unknown field")], id="configuration-has-no-metadata"),
    pytest.param("fairSharin", {}, [("fairSharin", 'unknown field; did you mean "fairSharing"?')], id="top-level-typo"),
]


@pytest.mark.parametrize(("path", "value", "expected"), CONFIG_CASES)
def test_configuration_rules(path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(samples.configuration, path, value, expected)


IDENTITY_CASES = [
    pytest.param("apiVersion", DELETE, [("apiVersion", "required field is missing (for example sluicegate.io/v1beta2)")], id="api-version-missing"),
    pytest.param("apiVersion", "batch/v1", [("apiVersion", 'unsupported apiVersion "batch/v1"; sluicegate reads sluicegate.io/v1beta2')], id="api-version-unknown"),
    pytest.param("apiVersion", "kueue.x-k8s.io/v1alpha1", [("apiVersion", 'unsupported apiVersion "kueue.x-k8s.io/v1alpha1"')], id="api-version-old-alpha"),
    pytest.param("kind", DELETE, [("kind", "required field is missing")], id="kind-missing"),
    pytest.param("kind", "Job", [("kind", 'must be one of ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, Workload, Topology for apiVersion kueue.x-k8s.io/v1beta2, got "Job"')], id="kind-unknown"),
    pytest.param("kind", "PriorityClass", [("kind", 'got "PriorityClass"')], id="kind-from-another-group"),
]


@pytest.mark.parametrize(("path", "value", "expected"), IDENTITY_CASES)
def test_api_version_and_kind(path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    _assert_errors(samples.local_queue, path, value, expected)


def test_all_errors_of_a_document_are_reported_together() -> None:
    doc = samples.cluster_queue()
    doc = mutate(doc, f"{RG}[0].flavors[1].resources[0].nominalQuota", "-1")
    doc = mutate(doc, "spec.stopPolicy", "Stop")
    doc = mutate(doc, "spec.topology", {})
    with pytest.raises(ManifestError) as info:
        decode(doc, source="queues.yaml#2")
    assert str(info.value).splitlines() == [
        "queues.yaml#2 ClusterQueue/team-a: spec.topology: not supported: Topology Aware Scheduling is not implemented",
        'queues.yaml#2 ClusterQueue/team-a: spec.resourceGroups[0].flavors[1].resources[0].nominalQuota: must be non-negative, got "-1"',
        'queues.yaml#2 ClusterQueue/team-a: spec.stopPolicy: must be one of None, Hold, HoldAndDrain, got "Stop"',
    ]
    assert (info.value.source, info.value.kind, info.value.name) == ("queues.yaml#2", "ClusterQueue", "team-a")


def test_namespaced_objects_are_named_with_their_namespace_in_errors() -> None:
    doc = mutate(samples.local_queue(), "spec.clusterQueue", DELETE)
    with pytest.raises(ManifestError) as info:
        decode(doc, source="queues.yaml#7")
    assert str(info.value) == "queues.yaml#7 LocalQueue/team-a/user-queue: spec.clusterQueue: required field is missing"


def _assert_errors(base: Callable[[], Doc], path: str, value: Any, expected: list[tuple[str, str]]) -> None:
    doc = mutate(base(), path, value)
    if not expected:
        decode(doc)
        return
    got = errors_of(doc)
    assert [e.path for e in got] == [p for p, _ in expected], [str(e) for e in got]
    for err, (_, fragment) in zip(got, expected, strict=True):
        assert fragment in err.message, (err.path, err.message)
