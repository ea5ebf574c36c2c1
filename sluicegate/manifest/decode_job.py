"""batch/v1 Job manifests: a Job queued through Kueue becomes a Workload with one pod set.

As with Kueue's Job integration, the LocalQueue comes from the label
``kueue.x-k8s.io/queue-name``, the priority from ``kueue.x-k8s.io/priority-class``
(a WorkloadPriorityClass) and the execution limit from
``kueue.x-k8s.io/max-exec-time-seconds``; ``kueue.x-k8s.io/job-min-parallelism``
enables partial admission.  The pod set has ``min(parallelism, completions)``
pods; the Job's own semantics (completions, completionMode, backoffLimit,
activeDeadlineSeconds) travel in the ``sluicegate.io/job`` annotation and the
controller runs the Job by them.

A Job annotated ``scheduling.k8s.io/group-name`` (or Volcano's
``scheduling.volcano.sh/group-name``) is in a kube-batch PodGroup: its
Workload names no queue here, and the controller fills the queue, priority
and ``minCount`` from the PodGroup (``controller/podgroups.py``).  A Job
whose pods ask for kube-batch (``schedulerName``) and name no group gets
kube-batch's default group: ``minCount`` 1.  The Job's labels are kept in
``sluicegate.io/job-labels`` so the controller can copy the ones its
Configuration names (``integrations.labelKeysToCopy``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sluicegate.manifest.dialect import METADATA_UNSUPPORTED
from sluicegate.manifest.errors import FieldError, ManifestError
from sluicegate.manifest.reader import unknown_field
from sluicegate.model.podgroups import (
    BATCH_SCHEDULER_NAMES,
    GROUP_MIN_MEMBER_ANNOTATION,
    GROUP_NAME_ANNOTATIONS,
    group_name,
)

JOB_API_VERSION = "batch/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
JOB_ANNOTATION = "sluicegate.io/job"
JOB_LABELS_ANNOTATION = "sluicegate.io/job-labels"

_SPEC_FIELDS = {
    "parallelism",
    "completions",
    "completionMode",
    "backoffLimit",
    "activeDeadlineSeconds",
    "template",
    "suspend",
}
_TOP_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")
# The Job's own fields refused, with the reason (its metadata shares the Workload's table).
_SPEC_UNSUPPORTED = {
    "ttlSecondsAfterFinished": "finished workloads are kept for the controller's finishedRetention",
    "podFailurePolicy": "failed pods count against backoffLimit",
    "backoffLimitPerIndex": "use backoffLimit",
    "maxFailedIndexes": "use backoffLimit",
    "selector": "sluicegate owns the Job's pods",
    "manualSelector": "sluicegate owns the Job's pods",
    "successPolicy": "a Job succeeds by its completions alone",
    "podReplacementPolicy": "a pod is replaced once all its processes have exited",
    "managedBy": "sluicegate's controller is the only one that runs Jobs",
}
_META_FIELDS = {
    "name",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
}


def is_job(body: Mapping[Any, Any]) -> bool:
    return body.get("kind") == "Job" and body.get("apiVersion") == JOB_API_VERSION


def _int(
    spec: Mapping[Any, Any], key: str, errors: list[FieldError], *, minimum: int, default: int | None
) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(FieldError(f"spec.{key}", f"must be an integer, got {value!r}"))
        return default
    if value < minimum:
        errors.append(FieldError(f"spec.{key}", f"must be at least {minimum}, got {value}"))
        return default
    return value


def job_to_workload(body: Mapping[Any, Any], source: str) -> dict[str, Any]:
    """The Workload document a Job stands for; raises ManifestError naming the Job's fields."""
    errors: list[FieldError] = []
    name = ""
    if body.get("apiVersion") != JOB_API_VERSION:
        errors.append(FieldError("apiVersion", f"a Job must be {JOB_API_VERSION}, got {body.get('apiVersion')!r}"))
    meta = body.get("metadata")
    if not isinstance(meta, Mapping):
        raise ManifestError(source, [FieldError("metadata", "required mapping with at least a name")], kind="Job")
    name = str(meta.get("name", ""))
    for key in meta:
        if key in METADATA_UNSUPPORTED:
            errors.append(FieldError(f"metadata.{key}", f"not supported: {METADATA_UNSUPPORTED[key]}"))
        elif key not in _META_FIELDS:
            errors.append(FieldError(f"metadata.{key}", unknown_field(str(key), _META_FIELDS)))
    for key in body:
        if key not in _TOP_FIELDS:
            errors.append(FieldError(str(key), unknown_field(str(key), _TOP_FIELDS)))
    if "status" in body and body["status"]:
        errors.append(FieldError("status", "not supported: a Job's status is computed by the controller"))
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        raise ManifestError(source, [*errors, FieldError("spec", "required mapping")], kind="Job", name=name)
    for key in spec:
        if key in _SPEC_UNSUPPORTED:
            errors.append(FieldError(f"spec.{key}", f"not supported: {_SPEC_UNSUPPORTED[key]}"))
        elif key not in _SPEC_FIELDS:
            errors.append(FieldError(f"spec.{key}", unknown_field(str(key), _SPEC_FIELDS)))
    if spec.get("suspend") is False:
        errors.append(FieldError("spec.suspend", "false is not supported: a queued Job starts when it is admitted"))
    parallelism = _int(spec, "parallelism", errors, minimum=0, default=1)
    completions = _int(spec, "completions", errors, minimum=1, default=None)
    backoff_limit = _int(spec, "backoffLimit", errors, minimum=0, default=6)
    deadline = _int(spec, "activeDeadlineSeconds", errors, minimum=1, default=None)
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        errors.append(FieldError("spec.completionMode", f"must be NonIndexed or Indexed, got {mode!r}"))
    if mode == "Indexed" and completions is None:
        errors.append(FieldError("spec.completions", "required when completionMode is Indexed"))
    labels = meta.get("labels") or {}
    annotations = dict(meta.get("annotations") or {})
    if not isinstance(labels, Mapping):
        errors.append(FieldError("metadata.labels", "must be a mapping"))
        labels = {}
    group = group_name(annotations)
    template = spec.get("template")
    if not isinstance(template, Mapping):
        errors.append(FieldError("spec.template", "required pod template"))
    shadow_min = None
    if not group and isinstance(template, Mapping):
        template, shadow_min = _default_group(template, errors)
    queue = labels.get(QUEUE_LABEL)
    if group:
        _check_group(labels, annotations, errors)
        queue = ""
    elif shadow_min is not None:
        # kube-batch's default group waits in its default queue.
        queue = queue or "default"
    elif not queue:
        errors.append(FieldError(f"metadata.labels[{QUEUE_LABEL}]", "required: the LocalQueue the Job is submitted to"))
    wl_spec: dict[str, Any] = {"queueName": queue}
    if PRIORITY_LABEL in labels:
        wl_spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_LABEL],
        }
    if MAX_EXEC_LABEL in labels:
        try:
            wl_spec["maximumExecutionTimeSeconds"] = int(str(labels[MAX_EXEC_LABEL]))
        except ValueError:
            errors.append(
                FieldError(
                    f"metadata.labels[{MAX_EXEC_LABEL}]",
                    f"must be a whole number of seconds, got {labels[MAX_EXEC_LABEL]!r}",
                )
            )
    count = min(parallelism or 0, completions) if completions is not None else (parallelism or 0)
    pod_set: dict[str, Any] = {"name": "main", "count": count, "template": template}
    if MIN_PARALLELISM_ANNOTATION in annotations:
        raw = annotations.pop(MIN_PARALLELISM_ANNOTATION)
        try:
            pod_set["minCount"] = int(str(raw))
        except ValueError:
            errors.append(
                FieldError(f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]", f"must be an integer, got {raw!r}")
            )
    if shadow_min is not None and shadow_min < count and "minCount" not in pod_set:
        pod_set["minCount"] = shadow_min
    if errors:
        raise ManifestError(source, errors, kind="Job", name=name)
    annotations[JOB_ANNOTATION] = json.dumps(
        {
            "completions": completions or 0,
            "parallelism": parallelism,
            "completionMode": mode,
            "backoffLimit": backoff_limit,
            "activeDeadlineSeconds": deadline,
        },
        sort_keys=True,
    )
    annotations[JOB_LABELS_ANNOTATION] = json.dumps(dict(labels), sort_keys=True)
    wl_meta = {k: v for k, v in meta.items() if k in ("name", "namespace", "uid", "creationTimestamp")}
    wl_meta["annotations"] = annotations
    wl_spec["podSets"] = [pod_set]
    return {"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": wl_meta, "spec": wl_spec}


def _check_group(labels: Mapping[Any, Any], annotations: Mapping[str, Any], errors: list[FieldError]) -> None:
    """A Job in a PodGroup takes its queue, priority and gang size from the PodGroup alone."""
    named = {str(annotations[k]) for k in GROUP_NAME_ANNOTATIONS if annotations.get(k)}
    if len(named) > 1:
        errors.append(FieldError(f"metadata.annotations[{GROUP_NAME_ANNOTATIONS[1]}]",
                                 f"names another PodGroup than {GROUP_NAME_ANNOTATIONS[0]}: {sorted(named)}"))
    for key, instead in ((QUEUE_LABEL, "spec.queue"), (PRIORITY_LABEL, "spec.priorityClassName")):
        if key in labels:
            errors.append(FieldError(f"metadata.labels[{key}]", f"a Job in a PodGroup takes this from the PodGroup's "
                                     f"{instead}; remove the label"))
    if MIN_PARALLELISM_ANNOTATION in annotations:
        errors.append(FieldError(f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]",
                                 "a Job in a PodGroup takes this from the PodGroup's spec.minMember; remove it"))


def _default_group(template: Mapping[Any, Any], errors: list[FieldError]) -> tuple[Mapping[Any, Any], int | None]:
    """kube-batch's default (shadow) group for a Job whose pods ask for kube-batch but name no PodGroup.

    Returns the template without ``schedulerName`` and the group's minMember
    (the pods' ``scheduling.k8s.io/group-min-member`` annotation, else 1), or
    the template unchanged and None when the pods do not ask for kube-batch
    (kube-batch's ``createShadowPodGroup`` in pkg/scheduler/cache/util.go).
    """
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, Mapping) or pod_spec.get("schedulerName") not in BATCH_SCHEDULER_NAMES:
        return template, None
    minimum = 1
    meta = template.get("metadata")
    pod_annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if isinstance(pod_annotations, Mapping) and GROUP_MIN_MEMBER_ANNOTATION in pod_annotations:
        raw = pod_annotations[GROUP_MIN_MEMBER_ANNOTATION]
        try:
            minimum = int(str(raw))
        except ValueError:
            errors.append(FieldError(f"spec.template.metadata.annotations[{GROUP_MIN_MEMBER_ANNOTATION}]",
                                     f"must be an integer, got {raw!r}"))
        if minimum < 1:
            errors.append(FieldError(f"spec.template.metadata.annotations[{GROUP_MIN_MEMBER_ANNOTATION}]",
                                     f"must be at least 1, got {raw!r}"))
            minimum = 1
    return {**template, "spec": {k: v for k, v in pod_spec.items() if k != "schedulerName"}}, minimum


def remap_errors(exc: ManifestError) -> ManifestError:
    """Errors found in the translated Workload, named by the Job's own fields."""
    out = []
    for e in exc.errors:
        path = e.path.replace("spec.podSets[0].template", "spec.template")
        path = path.replace("spec.podSets[0].minCount", f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]")
        path = path.replace("spec.podSets[0].count", "spec.parallelism")
        out.append(FieldError(path, e.message))
    return ManifestError(exc.source, out, kind="Job", name=exc.name if hasattr(exc, "name") else "")
