"""Devices on a real agent (issue 18 item 2): declared generic devices, and real NVIDIA GPUs where there are any.

A real controller and agent on 127.0.0.1.  The agent declares
``example.com/fpga`` with two files under a temporary directory as its
device paths: two pods get one each (disjoint, named in their environment),
a third waits at the controller until one ends and then gets the freed
one; a device file that disappears takes its device out of the node's
allocatable at the controller (the agent registers its new allocatable).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import container_doc, workload_doc

from .harness import Agent, Controller, get_json, kill_marked_processes, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

NODE = "node-dev"
FPGA = "example.com/fpga"
ENV = "FPGA_DEVICES"

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
  - coveredResources: [cpu, memory, example.com/fpga, nvidia.com/gpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "16"}
      - {name: memory, nominalQuota: 16Gi}
      - {name: example.com/fpga, nominalQuota: "8"}
      - {name: nvidia.com/gpu, nominalQuota: "8"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: main}
"""


class Cluster:
    def __init__(self, workdir: Path, *, devices: list[dict[str, Any]], nvidia: bool) -> None:
        self.workdir = workdir
        self.marker = f"sg-{uuid.uuid4().hex[:8]}"
        (workdir / "agent.yaml").write_text(json.dumps({"devices": devices, "nvidiaGpus": nvidia,
                                                        "deviceHealthInterval": "0.2s"}))
        self.controller = Controller(workdir, extra=["--agent-heartbeat-interval", "0.2"]).start()
        (workdir / "queues.yaml").write_text(QUEUES)
        sluicectl(self.s, "apply", "-f", str(workdir / "queues.yaml"))
        self.agent = Agent(workdir, self.s, NODE, extra=["--config", str(workdir / "agent.yaml")]).start()

    @property
    def s(self) -> str:
        return self.controller.address

    def apply(self, name: str, command: str, requests: dict[str, str]) -> None:
        container = container_doc(["sh", "-c", f"{command} # {self.marker}"],
                                  requests={"cpu": "100m", "memory": "16Mi", **requests})
        doc = workload_doc(name, container, queue="q", pod_spec={"restartPolicy": "Never",
                                                                 "terminationGracePeriodSeconds": 0})
        path = self.workdir / f"{name}.json"
        path.write_text(json.dumps(doc))
        sluicectl(self.s, "apply", "-f", str(path))

    def running(self, name: str) -> dict[str, Any]:
        return wait_for(f"pod of {name} running", lambda: next(
            (p for p in self.agent.pods() if p["workload"] == name and p["phase"] == "Running"), None), timeout=30)

    def printed(self, pod: dict[str, Any], *, until: str = "") -> str:
        """What the pod printed, once it printed a line (and ``until``)."""
        log_file = self.agent.data_dir / "pods" / pod["uid"] / "main.log"
        return wait_for(f"{pod['name']} printed", lambda: log_file.exists() and (t := log_file.read_text()).endswith(
            "\n") and until in t and t.strip(), timeout=10)

    def node(self) -> dict[str, Any]:
        return next(n for n in get_json(self.s, "nodes")["items"] if n["name"] == NODE)

    def close(self) -> None:
        try:
            self.agent.stop()
            self.controller.stop()
        finally:
            kill_marked_processes(self.marker)


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="sg-devices-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_declared_devices_are_handed_to_one_pod_each_and_a_third_waits(workdir: Path) -> None:
    paths = [workdir / "fpga0", workdir / "fpga1"]
    for p in paths:
        p.touch()
    cluster = Cluster(workdir, devices=[{"resource": FPGA, "paths": [str(p) for p in paths], "env": ENV}],
                      nvidia=False)
    try:
        node = cluster.node()
        assert (node["capacity"][FPGA], node["allocatable"][FPGA]) == (2, 2), node
        for name in ("one", "two"):
            cluster.apply(name, f'echo "${ENV}"; exec sleep 60', {FPGA: "1"})
        got = {name: cluster.printed(cluster.running(name)) for name in ("one", "two")}
        assert sorted(got.values()) == sorted(str(p) for p in paths), got
        assert {tuple(p["devices"][FPGA]) for p in cluster.agent.pods()} == {(str(paths[0]),), (str(paths[1]),)}

        # No device is free: the third waits (the controller places it on no node).
        cluster.apply("three", f'echo "${ENV}"; exec sleep 60', {FPGA: "1"})
        wait_for("three admitted and waiting for a node", lambda: workload_states(cluster.s).get("three")
                 in ("Admitted", "Pending"), timeout=10)
        assert not any(p["workload"] == "three" for p in cluster.agent.pods())

        # One ends: its device goes to the third.
        freed = next(p for p in cluster.agent.pods() if p["workload"] == "one")["devices"][FPGA]
        sluicectl(cluster.s, "delete", "workload", "one")
        third = cluster.running("three")
        assert third["devices"][FPGA] == freed and cluster.printed(third) == freed[0]

        # A device file that goes away: unhealthy, out of allocatable at the controller.
        Path(freed[0]).unlink()
        wait_for("allocatable registered anew", lambda: cluster.node()["allocatable"][FPGA] == 1, timeout=20)
        assert cluster.node()["capacity"][FPGA] == 2
    finally:
        cluster.close()


def v1_devices_cgroup() -> bool:
    return Path("/sys/fs/cgroup/devices/devices.deny").exists() and os.geteuid() == 0


def test_cgroup_v1_denies_the_device_files_a_pod_was_not_given(workdir: Path) -> None:
    """Character devices as the declared devices (/dev/zero 1:5, /dev/full 1:7): each pod can open its own only."""
    if not v1_devices_cgroup():
        pytest.skip("no writable cgroup v1 devices hierarchy here (v2 isolates by environment only)")
    cluster = Cluster(workdir, devices=[{"resource": FPGA, "paths": ["/dev/zero", "/dev/full"], "env": ENV}],
                      nvidia=False)
    try:
        probe = ('for d in /dev/zero /dev/full; do if (true > "$d") 2>/dev/null; then echo "$d:open"; '
                 'else echo "$d:denied"; fi; done; echo "mine=${ENV}"; exec sleep 60').replace("ENV", ENV)
        for name in ("one", "two"):
            cluster.apply(name, probe, {FPGA: "1"})
        seen = {}
        for name in ("one", "two"):
            pod = cluster.running(name)
            out = cluster.printed(pod, until="mine=")
            seen[pod["devices"][FPGA][0]] = sorted(out.split())
        assert seen == {"/dev/zero": ["/dev/full:denied", "/dev/zero:open", "mine=/dev/zero"],
                        "/dev/full": ["/dev/full:open", "/dev/zero:denied", "mine=/dev/full"]}, seen
        assert "denied through the cgroup v1 devices controller" in cluster.agent.log.read_text()
    finally:
        cluster.close()


def test_real_gpus_are_named_in_the_pods_environment(workdir: Path) -> None:
    """Runs only where nvidia-smi and NVML work: a pod that asks for one GPU sees exactly that one."""
    try:
        import pynvml  # noqa: F401  (the [gpu] extra)
    except ImportError:
        pytest.skip("nvidia-ml-py (pynvml) is not installed: pip install 'sluicegate[gpu]'")
    smi = shutil.which("nvidia-smi")
    if smi is None or subprocess.run([smi, "-L"], capture_output=True).returncode != 0:
        pytest.skip("no NVIDIA GPU here (nvidia-smi -L fails or is missing)")
    cluster = Cluster(workdir, devices=[], nvidia=True)
    try:
        node = cluster.node()
        assert int(node["allocatable"]["nvidia.com/gpu"]) >= 1 and node["labels"]["nvidia.com/gpu.product"], node
        cluster.apply("smi", f'echo "$CUDA_VISIBLE_DEVICES"; {smi} -L; echo END; exec sleep 60', {"nvidia.com/gpu": "1"})
        pod = cluster.running("smi")
        (uuid_,) = pod["devices"]["nvidia.com/gpu"]
        out = cluster.printed(pod, until="END")
        # nvidia-smi lists the one GPU the pod was given (NVML in the pod sees all; CUDA sees only this one).
        print(out)
        assert out.splitlines()[0] == uuid_ and uuid_ in out, out
    finally:
        cluster.close()
