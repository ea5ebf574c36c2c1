"""Pods never run as root by default (issue 13 item 5), shown on real controller and agent processes.

A pod's processes run as the namespace's unprivileged user (nobody here),
with no supplementary groups and no_new_privs, in a private HOME; they
cannot read another pod's log file nor the controller's store; runAsUser 0
is refused at creation where the namespace does not allow root (the field
named), and by the agent when only the controller would have allowed it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluicegate.agent.runtime import DEFAULT_PATH
from sluicegate.security.podsecurity import NOBODY
from tests.builders import container_doc, workload_doc

from .harness import Agent, Controller, get_json, kill_marked_processes, remove_cgroups, sluicectl, wait_for

pytestmark = pytest.mark.integration

NODE = "node-u"

QUEUES = """\
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: main}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "16"}
      - {name: memory, nominalQuota: 16Gi}
""" + "".join(f"""---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {{name: q, namespace: {ns}}}
spec: {{clusterQueue: main}}
""" for ns in ("default", "ops", "lax", "team"))

# ops may run root on both sides; lax only in the controller's view: the agent's own check refuses it.
# team: a uid of its own per pod.
TEAM = {"uidRange": {"min": 30000, "max": 30099}}
CONTROLLER_SETTINGS = {"podSecurity": {"namespaces": {"ops": {"user": "root", "allowRoot": True},
                                                      "lax": {"allowRoot": True}, "team": TEAM}}}
AGENT_SETTINGS = {"podUsers": {"ops": {"user": "root", "allowRoot": True}, "team": TEAM}}


class Cluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.marker = f"sg-{uuid.uuid4().hex[:8]}"
        (workdir / "controller.yaml").write_text(json.dumps(CONTROLLER_SETTINGS))
        (workdir / "agent.yaml").write_text(json.dumps(AGENT_SETTINGS))
        self.controller = Controller(workdir, extra=["--config", str(workdir / "controller.yaml"),
                                                     "--agent-heartbeat-interval", "0.2"]).start()
        self.agent: Agent | None = None
        (workdir / "queues.yaml").write_text(QUEUES)
        sluicectl(self.s, "apply", "-f", str(workdir / "queues.yaml"))
        self.agent = Agent(workdir, self.s, NODE, extra=["--config", str(workdir / "agent.yaml"),
                                                         "--cgroup-base", f"{self.marker}-{NODE}"]).start()

    @property
    def s(self) -> str:
        return self.controller.address

    def apply(self, name: str, command: str, *, namespace: str = "default",
              security: dict[str, Any] | None = None, check: bool = True) -> Any:
        container = container_doc(["sh", "-c", f"{command} # {self.marker}"],
                                  requests={"cpu": "100m", "memory": "16Mi"}, security=security)
        doc = workload_doc(name, container, ns=namespace, queue="q", api_version="kueue.x-k8s.io/v1beta2",
                           pod_spec={"restartPolicy": "Never", "terminationGracePeriodSeconds": 0})
        path = self.workdir / f"{namespace}-{name}.json"
        path.write_text(json.dumps(doc))
        return sluicectl(self.s, "apply", "-f", str(path), check=check)

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        assert self.agent is not None
        return wait_for(f"pod {name} running", lambda: next(
            (p for p in self.agent.pods() if p["name"] == f"{name}-main-0" and p["namespace"] == namespace
             and p["phase"] == "Running"
             and p["containers"][0]["pid"]), None), timeout=20)

    def close(self) -> None:
        try:
            if self.agent is not None:
                self.agent.stop()
            self.controller.stop()
        finally:
            kill_marked_processes(self.marker)
            remove_cgroups(f"{self.marker}-{NODE}")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # Not tmp_path: pytest's base directory is 0700, so no pod user could reach
    # its HOME under the agent's data dir; a real dataDir's parents are 0755.
    workdir = Path(tempfile.mkdtemp(prefix="sg-podusers-"))
    os.chmod(workdir, 0o711)
    c = Cluster(workdir)
    try:
        yield c
    finally:
        c.close()
        shutil.rmtree(workdir, ignore_errors=True)


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def proc_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def log_of(cluster: Cluster, pod: dict[str, Any]) -> Path:
    assert cluster.agent is not None
    return cluster.agent.data_dir / "pods" / pod["uid"] / "main.log"


def test_pods_run_unprivileged_in_a_private_home_and_cannot_read_other_logs_or_the_store(cluster: Cluster) -> None:
    cluster.apply("alpha", "echo secret-of-alpha; sleep 60")
    alpha = cluster.pod("alpha")
    alpha_log = log_of(cluster, alpha)
    wait_for("alpha wrote its log", lambda: b"secret-of-alpha" in alpha_log.read_bytes(), timeout=10)
    store = cluster.controller.store
    probe = (f"if cat {alpha_log}; then echo READ-OTHER-LOG; else echo NO-OTHER-LOG; fi; "
             f"if cat {store}; then echo READ-STORE; else echo NO-STORE; fi; "
             'echo hi > "$HOME/mine" && echo HOME-WRITABLE; echo "cwd=$(pwd)"; echo probes-done; sleep 60')
    cluster.apply("beta", probe)
    beta = cluster.pod("beta")
    beta_log = log_of(cluster, beta)
    out = wait_for("beta's probes done", lambda: "probes-done" in (t := beta_log.read_text()) and t, timeout=10)
    assert "NO-OTHER-LOG" in out and "NO-STORE" in out and "READ-" not in out, out
    assert "secret-of-alpha" not in out and "Permission denied" in out, out

    # Who the process is: nobody, no supplementary groups, no_new_privs.
    pid = beta["containers"][0]["pid"]
    st = proc_status(pid)
    assert st["Uid"].split() == [str(NOBODY)] * 4 and st["Gid"].split() == [str(NOBODY)] * 4, st
    assert st["Groups"] == "" and st["NoNewPrivs"] == "1", st
    # Its HOME: private, its own, its working directory; HOSTNAME is the node, PATH minimal.
    assert cluster.agent is not None
    home = cluster.agent.data_dir / "pods" / beta["uid"] / "home"
    info = home.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, NOBODY, 0o700)
    assert os.readlink(f"/proc/{pid}/cwd") == str(home) and f"cwd={home}" in out
    assert (home / "mine").read_text() == "hi\n" and "HOME-WRITABLE" in out
    env = proc_environ(pid)
    assert (env["HOME"], env["HOSTNAME"], env["PATH"]) == (str(home), NODE, DEFAULT_PATH)

    # Owner-only files: logs (root's), the agent's checkpoint (with the pods' metadata), the store.
    for path in (alpha_log, beta_log, cluster.agent.data_dir / "checkpoint.json", store):
        info = path.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), path
    for wal in store.parent.glob(store.name + "-*"):
        assert stat.S_IMODE(wal.stat().st_mode) == 0o600, wal
    assert stat.S_IMODE((cluster.agent.data_dir / "pods").stat().st_mode) == 0o711


def test_root_only_where_the_namespace_allows_it(cluster: Cluster) -> None:
    field = "spec.podSets[0].template.spec.containers[0].securityContext.runAsUser"
    refused = cluster.apply("root-here", "sleep 60", security={"runAsUser": 0}, check=False)
    assert refused.returncode != 0
    assert f"{field}: 0 (root) is not allowed in namespace default" in refused.stderr, refused.stderr
    assert "root-here" not in {w["metadata"]["name"] for w in get_json(cluster.s, "workloads")["items"]}

    # ops allows root (controller and agent): asked for, it is granted.
    cluster.apply("root-ops", "sleep 60", namespace="ops", security={"runAsUser": 0})
    st = proc_status(cluster.pod("root-ops", "ops")["containers"][0]["pid"])
    assert st["Uid"].split()[0] == "0", st

    # lax: the controller lets it through, the agent's own policy does not.
    cluster.apply("root-lax", "sleep 60", namespace="lax", security={"runAsUser": 0})

    def finished() -> dict[str, Any] | None:
        wl = get_json(cluster.s, "workload", "root-lax", "-n", "lax")
        return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == "Finished"), None)

    done = wait_for("root-lax refused by the agent", finished, timeout=20)
    expected = ("spec.containers[0].securityContext.runAsUser: 0 (root) is not allowed in namespace lax "
                "(allowed: uid 65534)")
    assert (done["reason"], done["message"]) == (
        "Failed", f"pod root-lax-main-0 failed (CreateContainerConfigError): {expected}")
    (pod,) = get_json(cluster.s, "workload", "root-lax", "-n", "lax")["status"]["extra"]["pods"]
    assert (pod["phase"], pod["reason"], pod["message"]) == ("Failed", "CreateContainerConfigError", expected)


def test_pods_with_a_uid_each_cannot_reach_each_others_home_or_processes(cluster: Cluster) -> None:
    cluster.apply("first", 'echo private > "$HOME/secret"; echo stored; sleep 60', namespace="team")
    first = cluster.pod("first", "team")
    assert cluster.agent is not None
    first_home = cluster.agent.data_dir / "pods" / first["uid"] / "home"
    first_pid = first["containers"][0]["pid"]
    wait_for("first stored its secret", lambda: (first_home / "secret").exists(), timeout=10)
    probe = (f"if cat {first_home}/secret; then echo READ-HOME; else echo NO-HOME; fi; "
             f"if kill -0 {first_pid}; then echo CAN-SIGNAL; else echo NO-SIGNAL; fi; echo probes-done; sleep 60")
    cluster.apply("second", probe, namespace="team")
    second = cluster.pod("second", "team")
    out = wait_for("second's probes done", lambda: "probes-done" in (t := log_of(cluster, second).read_text()) and t,
                   timeout=10)
    assert "NO-HOME" in out and "NO-SIGNAL" in out and "READ-HOME" not in out and "CAN-SIGNAL" not in out, out
    uids = {proc_status(p["containers"][0]["pid"])["Uid"].split()[0] for p in (first, second)}
    assert len(uids) == 2 and all(30000 <= int(u) <= 30099 for u in uids), uids
