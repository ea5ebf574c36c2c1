"""Pods (their runtime part) and terminations to and from the checkpoint's JSON (see sluicegate.agent.checkpoint)."""

from __future__ import annotations

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.pod import Container, Pod, RestartPolicy, RunAs
from sluicegate.agent.runtime.values import Reason, Termination


def _resources_json(cpu: int | None, memory: int | None) -> ckpt.JSONObject:
    resources: ckpt.JSONObject = {}
    if cpu is not None:
        resources["cpu"] = cpu
    if memory is not None:
        resources["memory"] = memory
    return resources


def _resources_from(reader: ckpt.FieldReader) -> dict[str, int]:
    resources: dict[str, int] = {}
    for key in ("cpu", "memory"):
        value = reader.get_opt_int(key)
        if value is not None:
            resources[key] = value
    return resources


def spec_to_json(spec: Pod) -> ckpt.JSONObject:
    """Manifest-shaped JSON; resources in canonical units (cpu millicores, memory bytes)."""
    containers: list[ckpt.JSONValue] = []
    for container in spec.containers:
        containers.append(
            {
                "name": container.name,
                "command": list(container.command),
                "args": list(container.args),
                "env": [{"name": name, "value": value} for name, value in container.env],
                "workingDir": container.working_dir,
                "limits": _resources_json(container.cpu_limit_millicores, container.memory_limit_bytes),
                "requests": _resources_json(container.cpu_request_millicores, container.memory_request_bytes),
                # Only where there are rules: checkpoints of pods without devices stay as they were.
                **({"deviceDeny": list(container.device_deny)} if container.device_deny else {}),
            }
        )
    return {
        "uid": spec.uid,
        "namespace": spec.namespace,
        "name": spec.name,
        "restartPolicy": str(spec.restart_policy),
        "terminationGracePeriodSeconds": spec.termination_grace_seconds,
        "containers": containers,
        "runAs": None if spec.run_as is None else {
            "uid": spec.run_as.uid, "gid": spec.run_as.gid, "noNewPrivs": spec.run_as.no_new_privs},
    }


def spec_from_json(obj: ckpt.JSONObject, *, path: str) -> Pod:
    """Inverse of spec_to_json; raises CheckpointError naming the field."""
    reader = ckpt.FieldReader(obj, path=path, where="spec")
    containers: list[Container] = []
    for item in reader.objs("containers"):
        limits = item.obj("limits")
        requests = item.obj("requests")
        containers.append(
            Container(
                name=item.get_str("name"),
                command=item.get_str_list("command"),
                args=item.get_str_list("args"),
                env=tuple((env.get_str("name"), env.get_str("value")) for env in item.objs("env")),
                working_dir=item.get_opt_str("workingDir"),
                limits=_resources_from(limits),
                requests=_resources_from(requests),
                device_deny=item.get_str_list("deviceDeny") if item.has("deviceDeny") else (),
            )
        )
    policy_text = reader.get_str("restartPolicy")
    try:
        policy = RestartPolicy(policy_text)
    except ValueError as exc:
        raise ckpt.CheckpointError(path=path, detail=f"spec.restartPolicy: {policy_text!r} is not a policy") from exc
    return Pod(
        uid=reader.get_str("uid"),
        namespace=reader.get_str("namespace"),
        name=reader.get_str("name"),
        restart_policy=policy,
        termination_grace_seconds=reader.get_opt_float("terminationGracePeriodSeconds"),
        containers=tuple(containers),
        run_as=run_as_from(reader.opt_obj("runAs")),
    )


def run_as_from(reader: ckpt.FieldReader | None) -> RunAs | None:
    # Checkpoints from before pods had users have no runAs: those ran as the agent.
    if reader is None:
        return None
    return RunAs(uid=reader.get_int("uid"), gid=reader.get_int("gid"), no_new_privs=reader.get_bool("noNewPrivs"))


def termination_json(term: Termination | None) -> ckpt.JSONValue:
    """A termination as the checkpoint writes it (``checkpoint.termination_json``)."""
    if term is None:
        return None
    return ckpt.termination_json(exit_code=term.exit_code, reason=str(term.reason), message=term.message,
                                 started_at=term.started_at, finished_at=term.finished_at, signal=term.signal)


def termination_from(record: ckpt.TerminationRecord | None, *, path: str) -> Termination | None:
    if record is None:
        return None
    try:
        reason = Reason(record.reason)
    except ValueError as exc:
        raise ckpt.CheckpointError(path=path, detail=f"termination reason {record.reason!r} is not known") from exc
    return Termination(
        exit_code=record.exit_code,
        reason=reason,
        message=record.message,
        started_at=record.started_at,
        finished_at=record.finished_at,
        signal=record.signal,
    )
