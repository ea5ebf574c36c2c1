"""Kubelet-style node admission, and preemption on behalf of critical pods.

The agent admits each pod it is told to run the way the kubelet does
(``lifecycle.predicateAdmitHandler`` plus ``preemption.CriticalPodAdmissionHandler``):

1. check the pod against the node's allocatable resources and pod count
   (:func:`fit`), plus whatever non-resource checks the caller ran;
2. if everything fits, admit;
3. a non-critical pod that does not fit is rejected, with the first failure
   as the reason ("OutOfcpu", "OutOfmemory", ...);
4. a critical pod whose *only* failures are insufficient resources is
   admitted anyway, and the pods to stop so that it fits are returned
   (:func:`pods_to_preempt`); if no set of preemptable pods frees enough,
   nothing is stopped and the pod is rejected.

Everything returns values.  Stopping victims, and recording that they were
stopped before doing it, is the runtime's job.

Amounts are canonical integers (``sluicegate.quantity``): cpu in millicores,
memory in bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

from sluicegate.agent.policy.qos import QOSClass
from sluicegate.quantity import format_canonical

__all__ = [
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "SYSTEM_CRITICAL_PRIORITY",
    "PODS",
    "PREEMPTION_FAILED_REASON",
    "PodInfo",
    "InsufficientResource",
    "PredicateFailure",
    "AdmissionFailure",
    "AdmissionDecision",
    "InsufficientToPreempt",
    "is_critical",
    "is_preemptable",
    "pod_request",
    "fit",
    "requirement_distance",
    "preemption_tiers",
    "pods_to_preempt",
    "handle_admission_failure",
    "admit_pod",
]

# Priorities of the two built-in PriorityClasses.  Any priority at or above
# SYSTEM_CRITICAL_PRIORITY makes a pod critical (kubelet
# IsCriticalPodBasedOnPriority); user PriorityClasses are capped well below it.
SYSTEM_CLUSTER_CRITICAL = 2_000_000_000
SYSTEM_NODE_CRITICAL = 2_000_001_000
SYSTEM_CRITICAL_PRIORITY = SYSTEM_CLUSTER_CRITICAL

# The pod-count pseudo resource.  A node that advertises it admits at most
# that many pods; every pod "requests" exactly one.
PODS = "pods"

# The kubelet reports a critical pod it could not make room for with this
# status reason.  We keep it so operators who know Kubernetes recognise it;
# the message says what actually happened.
PREEMPTION_FAILED_REASON = "UnexpectedAdmissionError"

# Resources checked in this order, like the scheduler's fitsRequest, so the
# first failure (the one reported as *the* reason) matches the kubelet's.
_FIXED_ORDER = (PODS, "cpu", "memory", "ephemeral-storage")


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What admission, preemption and eviction need to know about one pod.

    ``requests`` are the pod's *effective* requests
    (:func:`sluicegate.agent.policy.qos.effective_requests`), in canonical
    units.  ``admitted_at`` is when the agent admitted the pod, in seconds on
    the caller's clock; it only breaks ties (newer pods are chosen first,
    because stopping them loses the least work).
    """

    uid: str
    namespace: str
    name: str
    priority: int
    qos: QOSClass
    requests: Mapping[str, int] = field(default_factory=dict, hash=False)
    is_static: bool = False
    is_mirror: bool = False
    admitted_at: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", MappingProxyType(dict(self.requests)))

    @property
    def key(self) -> str:
        """``namespace/name``, for messages."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    """The node lacks ``resource`` for the pod (kubelet InsufficientResourceError)."""

    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def reason(self) -> str:
        """The kubelet's status reason, e.g. ``OutOfcpu`` (the resource name is not capitalised)."""
        return f"OutOf{self.resource}"

    @property
    def message(self) -> str:
        """The kubelet's message; amounts are canonical (millicores, bytes)."""
        return (
            f"Node didn't have enough resource: {self.resource}, "
            f"requested: {self.requested}, used: {self.used}, capacity: {self.capacity}"
        )

    @property
    def shortfall(self) -> int:
        """How much must be freed for the pod to fit (kubelet GetInsufficientAmount)."""
        return self.requested - (self.capacity - self.used)


@dataclass(frozen=True, slots=True)
class PredicateFailure:
    """A non-resource admission failure found by the caller (wrong node, OS, ...).

    Preemption cannot fix these, so a critical pod with one is rejected too.
    """

    reason: str
    message: str


AdmissionFailure = InsufficientResource | PredicateFailure


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """The outcome of admitting one pod.

    ``admitted`` with ``victims`` means: stop these pods, in this order, then
    start the new one.  When not admitted, ``failures`` holds the reasons
    (only the non-resource ones for a critical pod, as the kubelet does) and
    ``reason``/``message`` describe the first, for the pod's status.
    """

    admitted: bool
    victims: tuple[PodInfo, ...] = ()
    failures: tuple[AdmissionFailure, ...] = ()
    reason: str = ""
    message: str = ""


def _format_amounts(amounts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {format_canonical(name, amount)}" for name, amount in amounts.items())


class InsufficientToPreempt(Exception):
    """Even stopping every pod the preemptor may preempt would not free enough.

    Nothing has been stopped.  ``unmet`` is what would still be missing after
    preempting all ``candidates`` pods.
    """

    def __init__(self, *, preemptor: PodInfo, unmet: Mapping[str, int], candidates: int) -> None:
        self.preemptor = preemptor
        self.unmet: Mapping[str, int] = MappingProxyType(dict(unmet))
        self.candidates = candidates
        super().__init__(
            f"cannot make room for critical pod {preemptor.key}: stopping all {candidates} "
            f"preemptable pods would still leave {_format_amounts(self.unmet)} missing; "
            "no pod is stopped and the pod is rejected"
        )


def is_critical(pod: PodInfo) -> bool:
    """Static and mirror pods, and pods at system-critical priority or above (kubelet IsCriticalPod)."""
    return pod.is_static or pod.is_mirror or pod.priority >= SYSTEM_CRITICAL_PRIORITY


def is_preemptable(preemptor: PodInfo, victim: PodInfo) -> bool:
    """Whether ``preemptor`` may stop ``victim`` to make room (kubelet Preemptable).

    A critical preemptor may stop any non-critical pod; otherwise only a pod
    of strictly lower priority.  So a node-critical pod can preempt a
    cluster-critical one, but not the other way round, and a critical pod can
    even stop a static pod whose priority is lower than its own.
    """
    if is_critical(preemptor) and not is_critical(victim):
        return True
    return preemptor.priority > victim.priority


def pod_request(pod: PodInfo, resource: str) -> int:
    """The pod's request for ``resource``; every pod takes exactly one of ``pods``."""
    if resource == PODS:
        return 1
    return pod.requests.get(resource, 0)


def _resource_order(names: Iterable[str]) -> list[str]:
    fixed = [name for name in _FIXED_ORDER if name in names]
    return fixed + sorted(set(names) - set(_FIXED_ORDER))


def fit(
    *,
    allocatable: Mapping[str, int],
    admitted: Sequence[PodInfo],
    pod: PodInfo,
) -> list[InsufficientResource]:
    """Return every resource the node lacks for ``pod``; empty when it fits.

    ``admitted`` are the pods already running on the node, not ``pod`` itself.
    Rules, following the scheduler's ``fitsRequest`` that the kubelet reuses:

    * if the node advertises ``pods``, one more pod must stay within it;
    * a pod requesting nothing at all is only subject to the pod count;
    * each resource the pod requests (amount > 0) must fit in
      ``allocatable - sum(requests of admitted pods)``.

    A requested resource the node does not advertise counts as capacity 0.
    The kubelet instead drops unknown *extended* resources (they may be
    cluster-level); on bare metal there is no cluster-level resource, and
    admitting a GPU pod onto a GPU-less node would only fail later.

    Results are ordered pods, cpu, memory, ephemeral-storage, then the rest by
    name, so the first one is the reason the kubelet would report.
    """
    failures: list[InsufficientResource] = []
    if PODS in allocatable and len(admitted) + 1 > allocatable[PODS]:
        failures.append(
            InsufficientResource(resource=PODS, requested=1, used=len(admitted), capacity=allocatable[PODS])
        )
    wanted = {name: amount for name, amount in pod.requests.items() if amount > 0 and name != PODS}
    for name in _resource_order(wanted):
        used = sum(other.requests.get(name, 0) for other in admitted)
        capacity = allocatable.get(name, 0)
        if wanted[name] > capacity - used:
            failures.append(InsufficientResource(resource=name, requested=wanted[name], used=used, capacity=capacity))
    return failures


# --- preemption -------------------------------------------------------------

_QOS_ORDER = (QOSClass.BESTEFFORT, QOSClass.BURSTABLE, QOSClass.GUARANTEED)


def preemption_tiers(preemptor: PodInfo, pods: Iterable[PodInfo]) -> list[tuple[PodInfo, ...]]:
    """The pods ``preemptor`` may preempt (never itself), split by QoS class: BestEffort, Burstable, Guaranteed.

    This is the kubelet's merged ``sortPodsByQOS`` (pkg/kubelet/preemption):
    candidates are filtered by :func:`is_preemptable` and grouped by QoS class
    alone; priority and criticality only decide who is a candidate.  Grouping
    by priority first is a proposal upstream, not the kubelet's behaviour.
    Empty classes are omitted; each tier keeps the input order.
    """
    tiers: dict[QOSClass, list[PodInfo]] = {}
    for pod in pods:
        if pod.uid != preemptor.uid and is_preemptable(preemptor, pod):
            tiers.setdefault(pod.qos, []).append(pod)
    return [tuple(tiers[qos]) for qos in _QOS_ORDER if qos in tiers]


def _subtract(requirements: Mapping[str, int], pods: Iterable[PodInfo]) -> dict[str, int]:
    """What would remain of ``requirements`` once ``pods`` are stopped; met resources drop out."""
    pods = tuple(pods)
    remaining = {name: amount - sum(pod_request(pod, name) for pod in pods) for name, amount in requirements.items()}
    return {name: amount for name, amount in remaining.items() if amount > 0}


def requirement_distance(requirements: Mapping[str, int], pod: PodInfo) -> Fraction:
    """How far stopping ``pod`` alone leaves us from ``requirements`` (kubelet ``distance``).

    For each required resource, the fraction still missing after the pod's
    request, squared; summed.  0 means the pod covers everything, and each
    resource the pod does not help with adds 1, so resources count equally
    whatever their units.  A pod larger than needed is not penalised here;
    the smaller-request tie-break handles that.  Exact fractions replace the
    kubelet's float64 so that equal distances really compare equal.
    """
    total = Fraction(0)
    for name, amount in requirements.items():
        missing = amount - pod_request(pod, name)
        if missing > 0:
            total += Fraction(missing, amount) ** 2
    return total


def _distance_key(requirements: Mapping[str, int], pod: PodInfo) -> tuple[Fraction, int, int, float, str]:
    """Sort key for the next pod to preempt within a tier; smallest first.

    Criteria, in order: (1) smallest :func:`requirement_distance`, (2) smaller
    memory request, (3) smaller cpu request (the kubelet's
    ``smallerResourceRequest``), (4) most recently admitted, (5) uid.  The
    kubelet leaves (4)-(5) to slice order; we make them explicit so the
    choice never depends on the order pods were listed in.
    """
    return (
        requirement_distance(requirements, pod),
        pod_request(pod, "memory"),
        pod_request(pod, "cpu"),
        -pod.admitted_at,
        pod.uid,
    )


def _pick_by_distance(*, preemptor: PodInfo, tier: Sequence[PodInfo], requirements: Mapping[str, int]) -> list[PodInfo]:
    """Greedily pick pods of one tier until ``requirements`` are met (kubelet getPodsToPreemptByDistance)."""
    remaining_pods = list(tier)
    remaining = dict(requirements)
    chosen: list[PodInfo] = []
    while remaining:
        if not remaining_pods:
            # pods_to_preempt checks feasibility over all tiers first, so this
            # only fires if that check and this loop ever disagree.
            raise InsufficientToPreempt(preemptor=preemptor, unmet=remaining, candidates=len(tier))
        best = min(remaining_pods, key=lambda pod: _distance_key(remaining, pod))
        remaining_pods.remove(best)
        chosen.append(best)
        remaining = _subtract(remaining, (best,))
    return chosen


def pods_to_preempt(
    *,
    preemptor: PodInfo,
    pods: Sequence[PodInfo],
    requirements: Mapping[str, int],
) -> tuple[PodInfo, ...]:
    """Choose the pods to stop so that ``requirements`` are freed (kubelet getPodsToPreempt).

    ``requirements`` maps resource to the amount that must be freed
    (:attr:`InsufficientResource.shortfall`); ``pods`` are the pods running
    on the node.  Only pods ``preemptor`` may preempt are candidates, grouped
    into :func:`preemption_tiers`.  Then, from the most protected tier down,
    each tier contributes the fewest pods (by the distance heuristic) needed
    *assuming every less protected tier is stopped entirely and the pods
    already chosen from more protected tiers are stopped too*.  That reads:
    the minimal Guaranteed set if all BestEffort and Burstable pods went, then the Burstable set if all
    BestEffort pods and the chosen Guaranteed ones went, then just the
    BestEffort pods still needed.  Protected pods are therefore stopped only
    when less protected ones cannot free enough, and lower tiers are then
    trimmed to what is still missing.

    Returns victims in the kubelet's kill order: the BestEffort pods chosen,
    then the Burstable, then the Guaranteed, each in pick order.  Raises
    :class:`InsufficientToPreempt` (having chosen nothing) when even all
    candidates together are not enough.
    """
    needed = {name: amount for name, amount in requirements.items() if amount > 0}
    tiers = preemption_tiers(preemptor, pods)
    # after_lower[i]: what is still missing once every pod in tiers[0:i] is stopped.
    after_lower = [needed]
    for tier in tiers:
        after_lower.append(_subtract(after_lower[-1], tier))
    if after_lower[-1]:
        raise InsufficientToPreempt(
            preemptor=preemptor, unmet=after_lower[-1], candidates=sum(len(tier) for tier in tiers)
        )
    chosen: list[PodInfo] = []
    picked: list[list[PodInfo]] = []
    for index in range(len(tiers) - 1, -1, -1):
        still_needed = _subtract(after_lower[index], chosen)
        picks = _pick_by_distance(preemptor=preemptor, tier=tiers[index], requirements=still_needed)
        chosen.extend(picks)
        picked.append(picks)
    return tuple(pod for picks in reversed(picked) for pod in picks)


# --- admission --------------------------------------------------------------


def _reject(failures: Sequence[AdmissionFailure]) -> AdmissionDecision:
    # Like the kubelet, the first failure becomes the pod's status reason.
    first = failures[0]
    return AdmissionDecision(admitted=False, failures=tuple(failures), reason=first.reason, message=first.message)


def handle_admission_failure(
    *,
    pod: PodInfo,
    failures: Sequence[AdmissionFailure],
    running: Sequence[PodInfo],
) -> AdmissionDecision:
    """Decide what to do with a pod that failed admission (kubelet HandleAdmissionFailure).

    * Not critical: rejected with all ``failures``.
    * Critical with any non-resource failure: rejected with only those, since
      preemption could not fix them and resources are never a reason to
      reject a critical pod.
    * Critical with only resource failures: admitted, with the victims from
      :func:`pods_to_preempt` for each resource's shortfall; or rejected with
      reason ``UnexpectedAdmissionError`` (the kubelet's) when no set of
      running pods frees enough.
    """
    if not failures:
        return AdmissionDecision(admitted=True)
    if not is_critical(pod):
        return _reject(failures)
    other = [failure for failure in failures if isinstance(failure, PredicateFailure)]
    if other:
        return _reject(other)
    requirements = {
        failure.resource: failure.shortfall for failure in failures if isinstance(failure, InsufficientResource)
    }
    try:
        victims = pods_to_preempt(preemptor=pod, pods=running, requirements=requirements)
    except InsufficientToPreempt as err:
        return AdmissionDecision(
            admitted=False, failures=tuple(failures), reason=PREEMPTION_FAILED_REASON, message=str(err)
        )
    return AdmissionDecision(admitted=True, victims=victims)


def admit_pod(
    *,
    pod: PodInfo,
    allocatable: Mapping[str, int],
    running: Sequence[PodInfo],
    other_failures: Sequence[PredicateFailure] = (),
) -> AdmissionDecision:
    """Admit ``pod`` onto a node with ``allocatable`` already running ``running``.

    ``other_failures`` are non-resource checks the caller made.  Resource
    failures come first, as in the kubelet's GeneralPredicates.  ``running``
    must not contain ``pod``; a pod with the same uid is ignored anyway, so a
    pod can never preempt itself.
    """
    others = [candidate for candidate in running if candidate.uid != pod.uid]
    failures: list[AdmissionFailure] = [*fit(allocatable=allocatable, admitted=others, pod=pod), *other_failures]
    return handle_admission_failure(pod=pod, failures=failures, running=others)
