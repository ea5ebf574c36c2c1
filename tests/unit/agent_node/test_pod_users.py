"""The agent's own pod user policy: who a pod runs as, refusals named by field, kept across an agent restart.

Real processes (no cgroups).  The tests run as root, as the agent does.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from sluicegate.agent.node import SECURITY_REJECTED
from sluicegate.agent.pod import Container, Pod, RequestedSecurity, RestartPolicy
from sluicegate.agent.probes import ProbeSpec
from sluicegate.security.podsecurity import NOBODY, PodUserPolicies, PodUserPolicy

from .conftest import MakeNode
from .test_node_meta import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

OPS = PodUserPolicies(namespaces={"ops": PodUserPolicy(uid=0, gid=0, allow_root=True)})


def wish(uid: str, script: str, *, namespace: str = "team-a", security: RequestedSecurity | None = None,
         restart: str = "Never", probe: ProbeSpec | None = None) -> Pod:
    return Pod(
        uid=uid, name=uid, namespace=namespace, workload="wl", pod_set="main", index=0,
        containers=(Container(name="main", command=("sh", "-c", script), requests={"cpu": 100},
                                  security=security, readiness_probe=probe),),
        termination_grace_seconds=0, restart_policy=RestartPolicy(restart),
    )


def ids(pid: int) -> dict[str, str]:
    # The pid is setpriv's until it execs the command, halfway through dropping privileges for a moment.
    for _ in range(200):
        if Path(f"/proc/{pid}/comm").read_text().strip() != "setpriv":
            break
        time.sleep(0.01)
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    status = {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return {k: status[k] for k in ("Uid", "Gid", "Groups", "NoNewPrivs")}


async def test_root_is_refused_with_the_field_named_and_nothing_starts(make_node: MakeNode) -> None:
    node = await make_node()
    assert await node.run_pod(wish("as-root", "exit 0", security=RequestedSecurity(run_as_user=0))) is False
    assert node.runtime.status("as-root") is None
    report = node.report("as-root")
    assert report is not None
    assert (report.phase, report.reason, report.message) == (
        "Failed", SECURITY_REJECTED,
        "spec.containers[0].securityContext.runAsUser: 0 (root) is not allowed in namespace team-a (allowed: uid 65534)")
    assert node.admitted_pods() == []


async def test_run_as_non_root_with_root_is_refused_even_where_root_is_allowed(make_node: MakeNode) -> None:
    node = await make_node(pod_users=OPS)
    sc = RequestedSecurity(run_as_user=0, run_as_non_root=True)
    assert await node.run_pod(wish("nonroot", "exit 0", namespace="ops", security=sc)) is False
    report = node.report("nonroot")
    assert report is not None and report.message.startswith("spec.containers[0].securityContext.runAsUser: ")
    assert "runAsNonRoot is true" in report.message


async def test_a_pod_runs_as_nobody_and_keeps_its_user_after_an_agent_restart(make_node: MakeNode) -> None:
    node = await make_node()
    # Each run appends its uid in HOME (its working directory), then fails; Always restarts it (an adopted process's exit status is unknown).
    assert await node.run_pod(wish("plain", "id -u >> runs; sleep 1; exit 1", restart="Always")) is True
    st = node.runtime.status("plain")
    assert st is not None and st.containers[0].pid
    assert ids(st.containers[0].pid) == {"Uid": f"{NOBODY}\t" * 3 + f"{NOBODY}", "Gid": f"{NOBODY}\t" * 3 + f"{NOBODY}",
                                         "Groups": "", "NoNewPrivs": "1"}
    home = node.runtime.home("plain")
    info = home.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, NOBODY, 0o700)
    log = node.runtime.log_path("plain", "main")
    assert (log.stat().st_uid, stat.S_IMODE(log.stat().st_mode)) == (0, 0o600)

    # Agent restart: the pod is re-adopted from the checkpoint and its restarts still run as nobody.
    node = await make_node()
    assert node.runtime.privilege_argv("plain")[1:4] == [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    runs = home / "runs"
    ok = await wait_until(lambda: runs.exists() and len(runs.read_text().split()) >= 3, timeout=10)
    assert ok, (runs.exists() and runs.read_text(), log.read_text(), node.runtime.status("plain"))
    assert set(runs.read_text().split()) == {str(NOBODY)}

    # HOME is scratch: it goes when the controller forgets the pod; the log stays.
    await node.stop_pod("plain", grace_seconds=0, reason="Killed", message="")
    await node.runtime.wait("plain", timeout=10)
    await node.forget("plain")
    assert not home.exists() and log.exists()


async def test_root_where_the_namespace_allows_it(make_node: MakeNode) -> None:
    node = await make_node(pod_users=OPS)
    assert await node.run_pod(wish("ops-root", "sleep 30", namespace="ops", security=RequestedSecurity(run_as_user=0)))
    st = node.runtime.status("ops-root")
    assert st is not None and st.containers[0].pid
    assert ids(st.containers[0].pid)["Uid"].split() == ["0"] * 4
    # Unasked, a pod runs as its namespace's user: root here (user: root), without no_new_privs.
    assert await node.run_pod(wish("ops-plain", "sleep 30", namespace="ops"))
    st = node.runtime.status("ops-plain")
    assert st is not None and st.containers[0].pid
    assert (ids(st.containers[0].pid)["Uid"].split(), ids(st.containers[0].pid)["NoNewPrivs"]) == (["0"] * 4, "0")


async def test_exec_probes_run_as_the_pods_user(make_node: MakeNode) -> None:
    node = await make_node()
    probe = ProbeSpec(exec_command=("sh", "-c", f'test "$(id -u)" = {NOBODY} && test "$(pwd)" = "$HOME"'),
                      period_seconds=0.05, timeout_seconds=2.0)
    assert await node.run_pod(wish("probed", "sleep 30", probe=probe)) is True
    assert await wait_until(lambda: (r := node.report("probed")) is not None and r.ready, timeout=10)


async def test_a_uid_range_gives_each_pod_a_uid_of_its_own(make_node: MakeNode) -> None:
    team = PodUserPolicies(namespaces={"team-a": PodUserPolicy(uid=30000, gid=30000, uid_range=(30000, 30001),
                                                               per_pod=True)})
    node = await make_node(pod_users=team)
    assert await node.run_pod(wish("one", "sleep 30")) is True
    assert await node.run_pod(wish("two", "sleep 30")) is True
    uids = []
    for uid in ("one", "two"):
        st = node.runtime.status(uid)
        assert st is not None and st.containers[0].pid
        uids.append(ids(st.containers[0].pid)["Uid"].split()[0])
        assert node.runtime.home(uid).stat().st_uid == int(uids[-1])
    assert sorted(uids) == ["30000", "30001"]
    # The range is used up: the next pod is refused, naming the field.
    assert await node.run_pod(wish("three", "sleep 30")) is False
    report = node.report("three")
    assert report is not None and (report.reason, report.message) == (
        SECURITY_REJECTED, "spec.securityContext.runAsUser: every uid of namespace team-a's uidRange 30000-30001 "
                           "is held by a pod on this node")
    # A forgotten pod gives its uid back; a restarted agent knows who holds which.
    await node.stop_pod("one", grace_seconds=0, reason="Killed", message="")
    await node.runtime.wait("one", timeout=10)
    await node.forget("one")
    node = await make_node(pod_users=team)
    assert await node.run_pod(wish("four", "sleep 30")) is True
    st = node.runtime.status("four")
    assert st is not None and st.containers[0].pid
    assert ids(st.containers[0].pid)["Uid"].split()[0] == uids[0]
