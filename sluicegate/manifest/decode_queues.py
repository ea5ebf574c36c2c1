"""ClusterQueue, Cohort and LocalQueue documents, with Kueue's webhook rules."""

from __future__ import annotations

from fractions import Fraction

from sluicegate.manifest.dialect import SLUICEGATE_V1BETA2, Dialect, Meta
from sluicegate.manifest.reader import Amount, Fields, Problems, index, join, read_quantity
from sluicegate.manifest.syntax import (
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
    show,
)
from sluicegate.manifest.timefmt import parse_duration, parse_rfc3339
from sluicegate.model import (
    AdmissionFairSharingStatus,
    AdmissionMode,
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    FlavorFungibility,
    FlavorFungibilityPolicy,
    FlavorName,
    FlavorQuotas,
    FungibilityPreference,
    LabelSelector,
    LocalQueueSpec,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ReclaimPolicy,
    ResourceGroup,
    ResourceQuota,
    SelectorRequirement,
    StopPolicy,
)
from sluicegate.quantity import to_canonical

MAX_RESOURCE_GROUPS = 16
MAX_COVERED_RESOURCES = 64
MAX_FLAVORS_PER_GROUP = 64
MAX_FLAVORS_TOTAL = 256
MAX_COVERED_TOTAL = 256
# Kueue refuses positive weights this small: 1/weight would overflow its
# share arithmetic.
MIN_POSITIVE_WEIGHT = Fraction(1, 10**9)

QUEUEING_STRATEGIES = {s.value: s for s in QueueingStrategy}
KUEUE_QUEUEING_STRATEGIES = {s.value: s for s in QueueingStrategy if s is not QueueingStrategy.BACKFILL}
STOP_POLICIES = {s.value: s for s in StopPolicy}
WITHIN_CLUSTER_QUEUE = {p.value: p for p in PreemptionPolicy}
RECLAIM_WITHIN_COHORT = {p.value: p for p in ReclaimPolicy}
BORROW_WITHIN_COHORT = {p.value: p for p in BorrowWithinCohortPolicy}
FUNGIBILITY = {p.value: p for p in FlavorFungibilityPolicy}
PREFERENCES = {p.value: p for p in FungibilityPreference}
ADMISSION_MODES = {m.value: m for m in AdmissionMode}
KUEUE_ADMISSION_MODES = {m.value: m for m in AdmissionMode if m is not AdmissionMode.DOMINANT_RESOURCE_SHARE}
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

CLUSTER_QUEUE_UNSUPPORTED = {
    "admissionChecks": "sluicegate has no AdmissionCheck controllers (ProvisioningRequest, MultiKueue); "
    "reserving quota is admission",
    "admissionChecksStrategy": "sluicegate has no AdmissionCheck controllers (ProvisioningRequest, MultiKueue); "
    "reserving quota is admission",
    "concurrentAdmissionPolicy": (
        "concurrent admission (workload variants migrating between flavors) is not implemented"
    ),
    "topology": "Topology Aware Scheduling is not implemented",
}
LOCAL_QUEUE_UNSUPPORTED = {
    "wallTimePolicy": "wall-time budgets are not implemented",
}
# sluicegate extensions of the ClusterQueue spec, read only with our own apiVersion.
NATIVE_CLUSTER_QUEUE_FIELDS = ("minAdmitDuration",)
NATIVE_ONLY = {
    "minAdmitDuration": f"a sluicegate extension (minimum runtime before reclaim or fair-sharing preemption), "
    f"only read with apiVersion {SLUICEGATE_V1BETA2}",
}
STATUS_UNSUPPORTED = "status is computed by the controller; remove it from the manifest"
# A LocalQueue's status as the controller stores it: only the Admission Fair Sharing usage is durable state;
# the rest of a LocalQueue's status is computed for each reply.
LOCAL_QUEUE_COMPUTED_STATUS = {
    key: STATUS_UNSUPPORTED
    for key in ("conditions", "pendingWorkloads", "reservingWorkloads", "admittedWorkloads", "flavorsReservation",
                "flavorsUsage", "flavors")
}


def read_cluster_queue(doc: Fields, meta: Meta, dialect: Dialect) -> ClusterQueueSpec:
    unsupported = dict(CLUSTER_QUEUE_UNSUPPORTED)
    if dialect.v1beta1:
        cohort_key = "cohort"
        unsupported["cohortName"] = f"this is the v1beta2 spelling; {dialect.api_version} calls it cohort"
    else:
        cohort_key = "cohortName"
        unsupported["cohort"] = "this is the kueue.x-k8s.io/v1beta1 spelling; v1beta2 calls it cohortName"
    spec = doc.mapping(
        "spec",
        known=(
            "resourceGroups",
            cohort_key,
            "queueingStrategy",
            "namespaceSelector",
            "flavorFungibility",
            "preemption",
            "stopPolicy",
            "fairSharing",
            "admissionScope",
            *(NATIVE_CLUSTER_QUEUE_FIELDS if dialect.native else ()),
        ),
        unsupported={**unsupported, **({} if dialect.native else NATIVE_ONLY)},
    )
    if spec is None:
        return ClusterQueueSpec(name=ClusterQueueName(meta.name))
    cohort = spec.string(cohort_key, check=dns_subdomain_problem) or None
    groups = read_resource_groups(
        spec,
        limit_owner=f"spec.{cohort_key} is empty (there is no cohort to borrow from or lend to)",
        has_parent=cohort is not None,
        lending_within_nominal=True,
    )
    selector: LabelSelector | None = None
    if spec.has("namespaceSelector"):
        selector = read_selector(spec.get("namespaceSelector"), spec.path("namespaceSelector"), spec.problems)
    return ClusterQueueSpec(
        name=ClusterQueueName(meta.name),
        resource_groups=groups,
        cohort=CohortName(cohort) if cohort else None,
        namespace_selector=selector,
        queueing_strategy=read_queueing_strategy(spec, dialect),
        preemption=read_preemption(spec),
        flavor_fungibility=read_fungibility(spec, dialect),
        fair_sharing_weight=read_weight(spec),
        stop_policy=spec.choice("stopPolicy", STOP_POLICIES, default=StopPolicy.NONE),
        admission_mode=read_admission_scope(spec, dialect),
        min_admit_duration=read_min_admit_duration(spec) if dialect.native else None,
    )


def read_admission_scope(spec: Fields, dialect: Dialect) -> AdmissionMode | None:
    """spec.admissionScope: admissionMode is required when the scope is given (Kueue's CRD).

    ``DominantResourceShare`` is a sluicegate extension, read only with our own apiVersion.
    """
    scope = spec.mapping("admissionScope", known=("admissionMode",))
    if scope is None:
        return None
    if scope.get("admissionMode") == AdmissionMode.DOMINANT_RESOURCE_SHARE.value and not dialect.native:
        scope.error("admissionMode", f"DominantResourceShare is a sluicegate extension, only read with apiVersion "
                                     f"{SLUICEGATE_V1BETA2}; {dialect.api_version} has UsageBasedAdmissionFairSharing "
                                     f"and NoAdmissionScope")
        return None
    options = ADMISSION_MODES if dialect.native else KUEUE_ADMISSION_MODES
    return scope.choice("admissionMode", options, default=AdmissionMode.NO_ADMISSION_SCOPE, required=True)


def read_queueing_strategy(spec: Fields, dialect: Dialect) -> QueueingStrategy:
    if spec.get("queueingStrategy") == QueueingStrategy.BACKFILL.value and not dialect.native:
        spec.error("queueingStrategy", f"Backfill is a sluicegate extension, only read with apiVersion "
                                       f"{SLUICEGATE_V1BETA2}; {dialect.api_version} has StrictFIFO and "
                                       "BestEffortFIFO")
        return QueueingStrategy.BEST_EFFORT_FIFO
    options = QUEUEING_STRATEGIES if dialect.native else KUEUE_QUEUEING_STRATEGIES
    return spec.choice("queueingStrategy", options, default=QueueingStrategy.BEST_EFFORT_FIFO)


def read_min_admit_duration(spec: Fields) -> float | None:
    """``minAdmitDuration`` (a Go duration): the protection from reclaim and fair-sharing preemption."""
    value = spec.get("minAdmitDuration")
    if value is None:
        return None
    if not isinstance(value, str):
        spec.error("minAdmitDuration", f'must be a duration string such as "5m" or "90s", got {show(value)}')
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        spec.error("minAdmitDuration", str(exc))
        return None
    if seconds < 0:
        spec.error("minAdmitDuration", f"must be non-negative, got {show(value)}")
        return None
    return seconds or None


def read_cohort(doc: Fields, meta: Meta, dialect: Dialect) -> CohortSpec:
    unsupported: dict[str, str] = {}
    parent_keys = ["parentName"]
    if dialect.v1beta1:
        # Early v1beta1 Cohorts spelled it "parent"; both mean the same.
        parent_keys.append("parent")
    else:
        unsupported["parent"] = "this is the old spelling; v1beta2 calls it parentName"
    spec = doc.mapping("spec", known=(*parent_keys, "resourceGroups", "fairSharing"), unsupported=unsupported)
    if spec is None:
        return CohortSpec(name=CohortName(meta.name))
    parent_key = "parentName"
    if dialect.v1beta1 and spec.has("parent"):
        if spec.has("parentName"):
            spec.error("parent", "set parentName or parent, not both")
        parent_key = "parent"
    parent = spec.string(parent_key, check=dns_subdomain_problem) or None
    if parent is not None and parent == meta.name:
        spec.error(parent_key, f"a cohort cannot be its own parent, got {show(parent)}")
    groups = read_resource_groups(
        spec,
        limit_owner=f"spec.{parent_key} is empty (a root cohort has no parent to borrow from or lend to)",
        has_parent=parent is not None,
        # Kueue leaves a cohort's lendingLimit unbounded by its own
        # nominalQuota: a cohort lends its members' quota too.
        lending_within_nominal=False,
    )
    return CohortSpec(
        name=CohortName(meta.name),
        parent=CohortName(parent) if parent else None,
        resource_groups=groups,
        fair_sharing_weight=read_weight(spec),
    )


def read_local_queue(doc: Fields, meta: Meta) -> LocalQueueSpec:
    spec = doc.mapping(
        "spec", known=("clusterQueue", "stopPolicy", "fairSharing"), unsupported=LOCAL_QUEUE_UNSUPPORTED, required=True
    )
    afs_status = read_local_queue_status(doc)
    if spec is None:
        return LocalQueueSpec(namespace=meta.namespace, name=meta.name, cluster_queue=ClusterQueueName(""))
    return LocalQueueSpec(
        namespace=meta.namespace,
        name=meta.name,
        cluster_queue=ClusterQueueName(spec.string("clusterQueue", required=True, check=dns_subdomain_problem)),
        stop_policy=spec.choice("stopPolicy", STOP_POLICIES, default=StopPolicy.NONE),
        fair_sharing_weight=read_weight(spec),
        admission_fair_sharing_status=afs_status,
    )


def read_local_queue_status(doc: Fields) -> AdmissionFairSharingStatus | None:
    """status.fairSharing.admissionFairSharingStatus, as the controller stores it (a user's apply refuses status)."""
    status = doc.mapping("status", known=("fairSharing",), unsupported=LOCAL_QUEUE_COMPUTED_STATUS)
    fs = status.mapping("fairSharing", known=("admissionFairSharingStatus",), unsupported={
        "weightedShare": STATUS_UNSUPPORTED}) if status is not None else None
    afs = fs.mapping("admissionFairSharingStatus", known=("consumedResources", "lastUpdate")) if fs else None
    if afs is None:
        return None
    consumed: dict[str, float] = {}
    raw = afs.get("consumedResources")
    if raw is not None and not isinstance(raw, dict):
        afs.error("consumedResources", f"must be a mapping of resource names to quantities, got {show(raw)}")
    elif isinstance(raw, dict):
        for res, value in raw.items():
            path = join(afs.path("consumedResources"), str(res))
            amount = read_quantity(value, path, str(res), afs.problems)
            if amount is None:
                continue
            if amount.exact < 0:
                afs.problems.add(path, f'must be non-negative, got "{amount.text}"')
                continue
            # In the resource's base unit (millicores for cpu), kept fractional.
            consumed[str(res)] = float(amount.exact * to_canonical(str(res), Fraction(1)))
    text = afs.string("lastUpdate", required=True)
    last = 0.0
    if text:
        try:
            last = parse_rfc3339(text)
        except ValueError as exc:
            afs.error("lastUpdate", str(exc))
    return AdmissionFairSharingStatus(consumed_resources=consumed, last_update=last)


# -- resource groups ---------------------------------------------------------


def read_resource_groups(
    spec: Fields,
    *,
    limit_owner: str,
    has_parent: bool,
    lending_within_nominal: bool,
) -> tuple[ResourceGroup, ...]:
    """``spec.resourceGroups`` of a ClusterQueue or Cohort.

    ``limit_owner`` completes the message for a borrowing/lending limit set
    where there is nobody to borrow from; ``lending_within_nominal`` is
    Kueue's ClusterQueue-only rule lendingLimit <= nominalQuota.
    """
    groups: list[ResourceGroup] = []
    covered_by: dict[str, int] = {}
    flavor_in: dict[str, int] = {}
    flavor_total = 0
    covered_total = 0
    for gi, (gpath, graw) in enumerate(spec.items("resourceGroups", max_items=MAX_RESOURCE_GROUPS)):
        group = Fields.of(graw, gpath, spec.problems, known=("coveredResources", "flavors"))
        if group is None:
            continue
        covered = group.strings("coveredResources", check=qualified_name_problem)
        if not group.has("coveredResources"):
            group.error("coveredResources", "required field is missing")
        elif not covered:
            group.error("coveredResources", "must list at least 1 resource")
        elif len(covered) > MAX_COVERED_RESOURCES:
            group.error("coveredResources", f"must list at most {MAX_COVERED_RESOURCES} resources, got {len(covered)}")
        covered_total += len(covered)
        for ri, res in enumerate(covered):
            rpath = index(group.path("coveredResources"), ri)
            if res in covered_by:
                where = "this group" if covered_by[res] == gi else f"resourceGroups[{covered_by[res]}]"
                spec.problems.add(rpath, f"duplicate: {show(res)} is already covered by {where}")
            else:
                covered_by[res] = gi
        flavors: list[FlavorQuotas] = []
        for fpath, fraw in group.items("flavors", required=True, min_items=1, max_items=MAX_FLAVORS_PER_GROUP):
            flavor_total += 1
            fq = _read_flavor_quotas(
                fraw,
                fpath,
                spec.problems,
                covered=covered,
                limit_owner=limit_owner,
                has_parent=has_parent,
                lending_within_nominal=lending_within_nominal,
            )
            if fq is None:
                continue
            if fq.name in flavor_in:
                where = "this group" if flavor_in[fq.name] == gi else f"resourceGroups[{flavor_in[fq.name]}]"
                spec.problems.add(
                    join(fpath, "name"), f"duplicate: flavor {show(fq.name)} is already listed in {where}"
                )
            elif fq.name:
                flavor_in[fq.name] = gi
            flavors.append(fq)
        groups.append(ResourceGroup(covered_resources=covered, flavors=tuple(flavors)))
    if flavor_total > MAX_FLAVORS_TOTAL:
        spec.error(
            "resourceGroups",
            f"must list at most {MAX_FLAVORS_TOTAL} flavors in all groups together, got {flavor_total}",
        )
    if covered_total > MAX_COVERED_TOTAL:
        spec.error(
            "resourceGroups",
            f"must cover at most {MAX_COVERED_TOTAL} resources in all groups together, got {covered_total}",
        )
    return tuple(groups)


def _read_flavor_quotas(
    raw: object,
    path: str,
    problems: Problems,
    *,
    covered: tuple[str, ...],
    limit_owner: str,
    has_parent: bool,
    lending_within_nominal: bool,
) -> FlavorQuotas | None:
    flavor = Fields.of(raw, path, problems, known=("name", "resources"))
    if flavor is None:
        return None
    name = flavor.string("name", required=True, check=dns_subdomain_problem)
    entries = flavor.items("resources", required=True)
    if flavor.has("resources") and len(entries) != len(covered):
        flavor.error(
            "resources",
            f"must list the {len(covered)} coveredResources ({', '.join(covered)}) in the same order, "
            f"got {len(entries)}",
        )
    quotas: dict[str, ResourceQuota] = {}
    for ri, (rpath, rraw) in enumerate(entries):
        res = Fields.of(rraw, rpath, problems, known=("name", "nominalQuota", "borrowingLimit", "lendingLimit"))
        if res is None:
            continue
        rname = res.string("name", required=True)
        if rname and ri < len(covered) and rname != covered[ri]:
            res.error(
                "name",
                f"must be {show(covered[ri])} (coveredResources[{ri}]): each flavor lists the covered "
                f"resources in the same order, got {show(rname)}",
            )
        nominal = _non_negative(res.quantity("nominalQuota", rname, required=True), res, "nominalQuota")
        borrowing = _non_negative(res.quantity("borrowingLimit", rname), res, "borrowingLimit")
        lending = _non_negative(res.quantity("lendingLimit", rname), res, "lendingLimit")
        for key, amount in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
            if amount is not None and not has_parent:
                res.error(key, f'must not be set when {limit_owner}, got "{amount.text}"')
        if lending_within_nominal and lending is not None and nominal is not None and lending.exact > nominal.exact:
            res.error("lendingLimit", f'must be at most the nominalQuota ("{nominal.text}"), got "{lending.text}"')
        if rname:
            quotas[rname] = ResourceQuota(
                nominal=nominal.canonical if nominal is not None else 0,
                borrowing_limit=borrowing.canonical if borrowing is not None else None,
                lending_limit=lending.canonical if lending is not None else None,
            )
    return FlavorQuotas(name=FlavorName(name), resources=quotas)


def _non_negative(amount: Amount | None, fields: Fields, key: str) -> Amount | None:
    if amount is not None and amount.exact < 0:
        fields.error(key, f'must be non-negative, got "{amount.text}"')
        return None
    return amount


# -- policies ------------------------------------------------------------------


def read_preemption(spec: Fields) -> Preemption:
    pre = spec.mapping("preemption", known=("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"))
    if pre is None:
        return Preemption()
    within = pre.choice("withinClusterQueue", WITHIN_CLUSTER_QUEUE, default=PreemptionPolicy.NEVER)
    reclaim = pre.choice("reclaimWithinCohort", RECLAIM_WITHIN_COHORT, default=ReclaimPolicy.NEVER)
    borrow = BorrowWithinCohortPolicy.NEVER
    threshold: int | None = None
    bwc = pre.mapping("borrowWithinCohort", known=("policy", "maxPriorityThreshold"))
    if bwc is not None:
        borrow = bwc.choice("policy", BORROW_WITHIN_COHORT, default=BorrowWithinCohortPolicy.NEVER)
        threshold = bwc.integer("maxPriorityThreshold")
    if reclaim is ReclaimPolicy.NEVER and borrow is not BorrowWithinCohortPolicy.NEVER:
        spec.error(
            "preemption",
            f"reclaimWithinCohort=Never cannot be combined with borrowWithinCohort.policy={borrow.value}: "
            "preempting in the cohort while borrowing needs reclaimWithinCohort to allow preemption",
        )
    return Preemption(
        within_cluster_queue=within,
        reclaim_within_cohort=reclaim,
        borrow_within_cohort=borrow,
        max_priority_threshold=threshold,
    )


def read_fungibility(spec: Fields, dialect: Dialect) -> FlavorFungibility:
    ff = spec.mapping("flavorFungibility", known=("whenCanBorrow", "whenCanPreempt", "preference"))
    if ff is None:
        return FlavorFungibility()
    defaults = FlavorFungibility()
    when_borrow = _fungibility_policy(ff, "whenCanBorrow", "Borrow", dialect, default=defaults.when_can_borrow)
    when_preempt = _fungibility_policy(ff, "whenCanPreempt", "Preempt", dialect, default=defaults.when_can_preempt)
    preference: FungibilityPreference | None = None
    if ff.has("preference"):
        preference = ff.choice("preference", PREFERENCES, default=FungibilityPreference.BORROWING_OVER_PREEMPTION)
        try_next = FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
        if when_borrow is not try_next or when_preempt is not try_next:
            ff.error(
                "preference",
                "may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor, got "
                f"whenCanBorrow={when_borrow.value}, whenCanPreempt={when_preempt.value}",
            )
    return FlavorFungibility(when_can_borrow=when_borrow, when_can_preempt=when_preempt, preference=preference)


def _fungibility_policy(
    ff: Fields, key: str, v1beta1_word: str, dialect: Dialect, *, default: FlavorFungibilityPolicy
) -> FlavorFungibilityPolicy:
    # kueue.x-k8s.io/v1beta1 called "stop at this flavor" Borrow / Preempt.
    if ff.get(key) == v1beta1_word:
        if dialect.v1beta1:
            return FlavorFungibilityPolicy.MAY_STOP_SEARCH
        ff.error(
            key, f"{v1beta1_word} is the kueue.x-k8s.io/v1beta1 spelling; {dialect.api_version} calls it MayStopSearch"
        )
        return default
    return ff.choice(key, FUNGIBILITY, default=default)


def read_weight(spec: Fields) -> Fraction:
    fs = spec.mapping("fairSharing", known=("weight",))
    if fs is None:
        return Fraction(1)
    # The weight is a plain number, so read it in whole units ("memory-like"),
    # not as millicores; only the exact value is kept.
    amount = fs.quantity("weight", "weight")
    if amount is None:
        return Fraction(1)
    if amount.exact < 0:
        fs.error("weight", f'must be non-negative, got "{amount.text}"')
        return Fraction(1)
    if 0 < amount.exact <= MIN_POSITIVE_WEIGHT:
        fs.error("weight", f'must be 0 or greater than 1n (10^-9), got "{amount.text}"')
        return Fraction(1)
    return amount.exact


def read_selector(raw: object, path: str, problems: Problems) -> LabelSelector | None:
    sel = Fields.of(raw, path, problems, known=("matchLabels", "matchExpressions"))
    if sel is None:
        return None
    labels = sel.string_map("matchLabels", key_check=qualified_name_problem, value_check=label_value_problem)
    reqs: list[SelectorRequirement] = []
    for epath, eraw in sel.items("matchExpressions"):
        expr = Fields.of(eraw, epath, problems, known=("key", "operator", "values"))
        if expr is None:
            continue
        key = expr.string("key", required=True, check=qualified_name_problem)
        op = expr.choice("operator", {o: o for o in SELECTOR_OPERATORS}, default="", required=True)
        values = expr.strings("values", check=label_value_problem)
        if op in ("In", "NotIn") and not values:
            expr.error("values", f"must list at least one value when operator is {op}")
        if op in ("Exists", "DoesNotExist") and values:
            expr.error("values", f"must be empty when operator is {op}, got {len(values)} value(s)")
        if op:
            reqs.append(SelectorRequirement(key=key, operator=op, values=values))
    return LabelSelector(match_labels=labels, match_expressions=tuple(reqs))
