"""securityContext travels to the agent merged (container over pod), "unset" distinct from 0, and back into a wish."""

from __future__ import annotations

from sluicegate.agent.link import pod_from_proto
from sluicegate.agent.pod import RequestedSecurity
from sluicegate.controller.service.agents import _container
from sluicegate.model.workloads import Container, SecurityContext
from sluicegate.v1 import agent_pb2


def test_container_fields_override_the_pods_and_unset_stays_unset() -> None:
    pod = SecurityContext(run_as_user=1000, run_as_group=1000, run_as_non_root=True)
    c = Container(name="main", command=("true",), security_context=SecurityContext(run_as_user=0,
                                                                                    allow_privilege_escalation=False))
    out = _container(c, pod)
    assert (out.run_as_user, out.run_as_group, out.run_as_non_root, out.allow_privilege_escalation) == (0, 1000, True, False)
    assert out.HasField("run_as_user")  # 0 is sent, not dropped as a default
    bare = _container(Container(name="main", command=("true",)), None)
    assert not any(bare.HasField(f) for f in ("run_as_user", "run_as_group", "run_as_non_root",
                                              "allow_privilege_escalation"))
    spec = agent_pb2.PodSpec(uid="u", name="p", namespace="ns", containers=[out, bare])
    wish = pod_from_proto(spec)
    assert wish.containers[0].security == RequestedSecurity(run_as_user=0, run_as_group=1000, run_as_non_root=True,
                                                            allow_privilege_escalation=False)
    assert wish.containers[1].security is None
