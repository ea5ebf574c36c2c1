"""RunPod on the wire: pods of one pod set share a template, each carries its own name, index and requests.

The env a pod gets follows what Kubernetes' downward API and an Indexed
Job's JOB_COMPLETION_INDEX give (kubernetes/kubernetes pkg/controller/job
indexed_job_utils.go sets the index env per pod).
"""

from __future__ import annotations

from dataclasses import replace

from sluicegate.controller.lifecycle import JOB_ANNOTATION, JobSpec
from sluicegate.controller.nodes import RunPodCommand
from sluicegate.controller.service import agents
from sluicegate.v1 import agent_pb2

from .test_pod_reports import admitted, cluster


def run_pods() -> list[RunPodCommand]:
    m, session = cluster()
    admitted(m, "w", 4)
    sent = [c for c in session.sent if isinstance(c, RunPodCommand)]
    assert len(sent) == 4
    return sent


def fresh(cmd: RunPodCommand) -> agent_pb2.ControllerMessage:
    """The message built with no template kept from earlier pods."""
    agents._templates = agents._Templates()
    return agents.command_to_proto(cmd)


def env(spec: agent_pb2.PodSpec) -> dict[str, str]:
    return {e.name: e.value for e in spec.containers[0].env}


def test_each_pod_of_a_pod_set_gets_its_own_fields_and_nothing_of_the_previous_pod() -> None:
    sent = run_pods()
    expected = [fresh(c) for c in sent]
    agents._templates = agents._Templates()
    got = [agents.command_to_proto(c) for c in sent]
    assert got == expected
    for cmd, msg in zip(sent, got, strict=True):
        spec = msg.run_pod.pod
        assert (spec.uid, spec.name, spec.index) == (cmd.pod.uid, cmd.pod.name, cmd.pod.index)
        assert dict(spec.requests) == dict(cmd.pod.requests)
        assert env(spec) == {"SLUICEGATE_NAMESPACE": "default", "SLUICEGATE_WORKLOAD": "w",
                             "SLUICEGATE_POD_SET": "main", "SLUICEGATE_POD_NAME": cmd.pod.name,
                             "SLUICEGATE_POD_INDEX": str(cmd.pod.index)}
        assert spec.labels["sluicegate.io/workload"] == "w"


def test_an_indexed_job_pod_is_told_its_completion_index_and_a_changed_workload_is_not_served_stale() -> None:
    sent = run_pods()
    job = JobSpec(completions=4, parallelism=4, indexed=True)
    indexed = replace(sent[0].workload, annotations={JOB_ANNOTATION: job.to_json()}, labels={"team": "a"})
    cmds = [replace(c, workload=indexed) for c in sent]
    agents.command_to_proto(sent[0])  # a template for the plain workload object first
    for cmd in cmds:
        spec = agents.command_to_proto(cmd).run_pod.pod
        assert spec == fresh(cmd).run_pod.pod
        assert env(spec)["JOB_COMPLETION_INDEX"] == str(cmd.pod.index)
        assert spec.labels["team"] == "a"


def test_workloads_that_share_a_pod_set_each_get_their_own_identity() -> None:
    """One-pod workloads of one shape share their pod set value (decoded once); the part of the
    template kept per pod set must carry nothing of the workload it was first built for."""
    sent = run_pods()
    base = sent[0]
    others = [
        replace(base, workload=replace(base.workload, name=f"w{i}", namespace=f"ns{i}", uid=f"uid-{i}",
                                       priority=i, labels={"n": str(i)}))
        for i in range(3)
    ]
    assert all(c.pod_set is base.pod_set for c in others)
    agents._templates = agents._Templates()
    got = [agents.command_to_proto(c).run_pod.pod for c in [base, *others, base]]
    assert got == [fresh(c).run_pod.pod for c in [base, *others, base]]
    for i, spec in enumerate(got[1:4]):
        assert (spec.namespace, spec.workload, spec.workload_uid, spec.priority) == (f"ns{i}", f"w{i}", f"uid-{i}", i)
        assert env(spec)["SLUICEGATE_NAMESPACE"] == f"ns{i}" and env(spec)["SLUICEGATE_WORKLOAD"] == f"w{i}"
        assert dict(spec.labels) == {"sluicegate.io/workload": f"w{i}", "sluicegate.io/pod-set": "main", "n": str(i)}
    assert env(got[4])["SLUICEGATE_WORKLOAD"] == "w" and "n" not in got[4].labels


def test_a_one_pod_pod_set_is_built_in_place_as_a_kept_template_would_build_it() -> None:
    """A pod set of one pod builds its RunPod in place, with no template kept; the same pod of a larger
    pod set goes through the template: the messages are the same."""
    sent = run_pods()
    job = JobSpec(completions=1, parallelism=1, indexed=True)
    for workload in (sent[0].workload, replace(sent[0].workload, annotations={JOB_ANNOTATION: job.to_json()},
                                                labels={"team": "a"})):
        cmd = replace(sent[0], workload=workload)
        one = replace(cmd.pod_set, count=1)
        in_place = replace(cmd, workload=replace(workload, pod_sets=(one,)), pod_set=one)
        agents._templates = agents._Templates()
        direct = [agents.command_to_proto(c).run_pod.pod for c in (in_place, in_place, cmd, in_place)]
        assert direct == [fresh(cmd).run_pod.pod] * 4
