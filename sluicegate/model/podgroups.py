"""kube-batch and Volcano gangs: PodGroups, and the Queue documents that become ClusterQueues.

A PodGroup is stored as its own kind; the Job that names it (annotation
``scheduling.k8s.io/group-name``) becomes one Workload whose pod set is
admitted all-or-nothing for ``min_member`` pods (Kueue's partial
admission, ``minCount``).  A kube-batch ``Queue`` is not stored as such: the
controller turns it into a ClusterQueue (see ``controller/podgroups.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KUBE_BATCH_V1ALPHA1 = "scheduling.incubator.k8s.io/v1alpha1"
VOLCANO_V1BETA1 = "scheduling.volcano.sh/v1beta1"

# The annotation that puts a Job's pods into a PodGroup: kube-batch's key (which Volcano reads too),
# and Volcano's own (pkg/apis/scheduling/v1alpha1/labels.go; volcano-sh/apis scheduling/v1beta1/labels.go).
GROUP_NAME_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
# kube-batch's default (shadow) group takes its minMember from this pod annotation (default 1).
GROUP_MIN_MEMBER_ANNOTATION = "scheduling.k8s.io/group-min-member"
# The pod template schedulerName values that ask for kube-batch's semantics when no group is named.
BATCH_SCHEDULER_NAMES = ("kube-batch", "volcano")

# kube-batch's phases (pkg/apis/scheduling/v1alpha1/types.go); Volcano adds Inqueue and Completed.
PENDING, INQUEUE, RUNNING, UNKNOWN, COMPLETED = "Pending", "Inqueue", "Running", "Unknown", "Completed"


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    # The gang: no pod runs until this many can; kube-batch's default is 1.
    min_member: int = 1
    # The LocalQueue (in the PodGroup's namespace) its Job waits in.
    queue: str = "default"
    # A PriorityClass (scheduling.k8s.io/v1) giving the Job's workload its priority ("": none).
    priority_class_name: str = ""
    # Canonical amounts by resource: the gang also waits until this much fits (Volcano's enqueue).
    min_resources: Mapping[str, int] = field(default_factory=dict)
    # Which API the document used: the status is reported in that API's phases.
    api_version: str = KUBE_BATCH_V1ALPHA1
    uid: str = ""
    creation_timestamp: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BatchQueue:
    """A kube-batch (or Volcano) Queue: its weight sets its deserved share of the cluster."""

    name: str
    weight: int = 1
    # Volcano's capability: the most the queue may hold, canonical amounts by resource (empty: no cap).
    capability: Mapping[str, int] = field(default_factory=dict)
    api_version: str = KUBE_BATCH_V1ALPHA1


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    """What kube-batch writes into a PodGroup's status: the phase and its pods by state."""

    phase: str
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    # The workload that runs the group's pods ("": none yet).
    workload: str = ""
    message: str = ""


def group_name(annotations: Mapping[str, str]) -> str:
    """The PodGroup a Job's annotations name ("": none)."""
    for key in GROUP_NAME_ANNOTATIONS:
        value = annotations.get(key, "")
        if value:
            return value
    return ""
