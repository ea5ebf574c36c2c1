"""GPUs (through a fake NVML library) and declared generic devices, handed to one pod at a time.

The discovery, health and usage code is the agent's own (sluicegate.agent.nvml);
only the library under it is a stand-in with pynvml's functions
(nvmlInit, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, nvmlDeviceGetUUID,
nvmlDeviceGetName, nvmlDeviceGetMemoryInfo, nvmlDeviceGetUtilizationRates and
the XID event set).  Pods are real processes on a real runtime; the
checkpoint is the real file, read back by a restarted node.

Semantics follow the kubelet's device manager
(kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go: capacity
counts every device, allocatable the healthy ones; a pod the manager cannot
give devices to fails admission with UnexpectedAdmissionError, "Allocate
failed due to requested number of devices unavailable for ...") and NVIDIA's
device plugin (its health check ignores the XIDs 13, 31, 43, 45, 68, 109 an
application causes by itself).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.devices import GPU_RESOURCE, Device, Devices, pick
from sluicegate.agent.link import report_to_proto
from sluicegate.agent.metrics import AgentMetrics
from sluicegate.agent.node import AgentNode
from sluicegate.agent.nvml import MIB, load_pynvml, open_nvml
from sluicegate.agent.pod import Container, Pod
from sluicegate.agent.settings import DeviceSpec, SettingsError, load_settings

from .conftest import MakeNode
from .test_node_meta import wait_until

GIB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"
H100_BYTES = 81559 * MIB


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    uuid: str
    name: str = H100
    total: int = H100_BYTES
    used: int = 0
    busy: int = 0
    broken: bool = False  # every query fails


@dataclass
class FakeNvmlLibrary:
    """pynvml's surface as the agent uses it, over a list of fake GPUs (handles are the FakeGpu objects)."""

    gpus: list[FakeGpu]
    events: list[SimpleNamespace] = field(default_factory=list)
    initialised: bool = False
    fail_init: str = ""
    NVMLError: type[Exception] = FakeNVMLError
    nvmlEventTypeXidCriticalError: int = 8

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise FakeNVMLError(self.fail_init)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        assert self.initialised
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def _check(self, gpu: FakeGpu) -> FakeGpu:
        if gpu.broken:
            raise FakeNVMLError("GPU is lost")
        return gpu

    def nvmlDeviceGetUUID(self, handle: FakeGpu) -> str:
        return handle.uuid

    def nvmlDeviceGetName(self, handle: FakeGpu) -> bytes:
        return self._check(handle).name.encode()  # older pynvml versions return bytes

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> SimpleNamespace:
        g = self._check(handle)
        return SimpleNamespace(total=g.total, used=g.used, free=g.total - g.used)

    def nvmlDeviceGetMinorNumber(self, handle: FakeGpu) -> int:
        return self.gpus.index(handle)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._check(handle).busy, memory=0)

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(self, handle: FakeGpu, types: int, event_set: str) -> None:
        assert types == self.nvmlEventTypeXidCriticalError

    def nvmlEventSetWait(self, event_set: str, timeout_ms: int) -> SimpleNamespace:
        if not self.events:
            raise FakeNVMLError("Timeout")
        return self.events.pop(0)

    def nvmlEventSetFree(self, event_set: str) -> None:
        pass

    def xid(self, index: int, xid: int) -> None:
        self.events.append(SimpleNamespace(device=self.gpus[index], eventData=xid,
                                           eventType=self.nvmlEventTypeXidCriticalError))


def four_gpus() -> FakeNvmlLibrary:
    return FakeNvmlLibrary([FakeGpu(f"GPU-{i:04d}-aaaa") for i in range(4)])


def gpu_devices(lib: FakeNvmlLibrary, declared: tuple[DeviceSpec, ...] = ()) -> Devices:
    nvml, gpus = open_nvml(lib)
    return Devices(gpus=gpus, nvml=nvml, declared=declared)


def gpu_pod(uid: str, gpus: int, *, resource: str = GPU_RESOURCE, var: str = "CUDA_VISIBLE_DEVICES") -> Pod:
    """A pod that prints its device variable and NVIDIA_VISIBLE_DEVICES on one line, then waits."""
    body = f'echo "${var}|$NVIDIA_VISIBLE_DEVICES"; exec sleep 60'
    return Pod(uid=uid, name=uid, namespace="ml", workload=f"wl-{uid}",
               containers=(Container(name="main", command=("sh", "-c", body),
                                     env=((var, "pod-chose-this"),),  # the node's value must win
                                     requests={"cpu": 10, resource: gpus}, limits={resource: gpus}),),
               termination_grace_seconds=0)


def reason(node: AgentNode, uid: str) -> str:
    """The reason of a pod the node reports Failed."""
    report = node.report(uid)
    assert report is not None and report.phase == "Failed"
    return report.reason


async def printed(node: AgentNode, uid: str) -> str:
    """The line the pod printed (within 10 s), from its log."""
    log_file = node.runtime.log_path(uid, "main")
    assert await wait_until(lambda: log_file.exists() and log_file.read_text().endswith("\n"), timeout=10), \
        f"pod {uid} printed nothing"
    return log_file.read_text().strip()


def test_discovery_counts_labels_and_health() -> None:
    lib = four_gpus()
    lib.gpus[3].broken = True
    devices = gpu_devices(lib)
    assert devices.capacity() == {GPU_RESOURCE: 4}
    assert devices.allocatable() == {GPU_RESOURCE: 3}
    # GPU feature discovery's format: product with '-' for spaces, memory in MiB.
    assert devices.labels() == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
                                "nvidia.com/gpu.count": "4"}
    assert [d.healthy for d in devices.by_resource[GPU_RESOURCE]] == [True, True, True, False]


def test_no_library_no_gpus_one_log_line(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the import fails as without the package
    with caplog.at_level(logging.INFO, logger="sluicegate.agent.nvml"):
        assert open_nvml() == (None, [])
    assert [r.getMessage() for r in caplog.records] == [
        "no NVIDIA GPUs: the nvidia-ml-py package (pynvml) is not installed (pip install 'sluicegate[gpu]' to "
        "use GPUs)"]
    lib = four_gpus()
    lib.fail_init = "NVML Shared Library Not Found"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sluicegate.agent.nvml"):
        assert open_nvml(lib) == (None, [])
    assert [r.getMessage() for r in caplog.records] == [
        "no NVIDIA GPUs: NVML could not start (NVML Shared Library Not Found)"]
    assert open_nvml(FakeNvmlLibrary([])) == (None, [])


def test_pick_takes_the_lowest_free_healthy_indices() -> None:
    devs = [Device("r", "a", 0), Device("r", "b", 1, healthy=False), Device("r", "c", 2), Device("r", "d", 3)]
    assert pick(devs, {"a"}, 2) == ("c", "d")
    assert pick(devs, {"a"}, 3) is None


async def test_pods_get_disjoint_gpus_named_by_uuid_and_a_restart_keeps_them(
        make_node: MakeNode, tmp_path: Path) -> None:
    lib = four_gpus()
    node = await make_node(devices=gpu_devices(lib))
    assert (node.capacity[GPU_RESOURCE], node.allocatable[GPU_RESOURCE]) == (4, 4)
    seen: dict[str, str] = {}
    for uid, n in (("a", 2), ("b", 1)):
        assert await node.run_pod(gpu_pod(uid, n)) is True
        seen[uid] = await printed(node, uid)
    cuda = {uid: v.split("|")[0].split(",") for uid, v in seen.items()}
    assert cuda == {"a": ["GPU-0000-aaaa", "GPU-0001-aaaa"], "b": ["GPU-0002-aaaa"]}
    # NVIDIA_VISIBLE_DEVICES names the same GPUs.
    assert all(v.split("|")[0] == v.split("|")[1] for v in seen.values())
    # Recorded in the checkpoint file itself.
    on_disk = {p["node"]["uid"]: p["node"]["devices"] for p in json.loads(ckpt.path_for(node.data_dir).read_text())
               ["pods"] if "node" in p}
    assert on_disk == {"a": {GPU_RESOURCE: ["GPU-0000-aaaa", "GPU-0001-aaaa"]}, "b": {GPU_RESOURCE: ["GPU-0002-aaaa"]}}

    # An agent restart: a new NVML session, the pods adopted from the checkpoint with their GPUs.
    restarted = await make_node(devices=gpu_devices(lib))
    assert {u: dict(m.devices) for u, m in restarted.meta.items()} == {
        "a": {GPU_RESOURCE: ("GPU-0000-aaaa", "GPU-0001-aaaa")}, "b": {GPU_RESOURCE: ("GPU-0002-aaaa",)}}
    assert await restarted.run_pod(gpu_pod("c", 1)) is True
    assert (await printed(restarted, "c")).split("|")[0] == "GPU-0003-aaaa"
    # All four are held: the fifth is refused by the count, as the kubelet's fit does.
    assert await restarted.run_pod(gpu_pod("d", 1)) is False
    assert reason(restarted, "d") == f"OutOf{GPU_RESOURCE}"

    # A finished pod gives its GPUs back.
    await restarted.stop_pod("b", grace_seconds=0, reason="Killed", message="done")
    await restarted.runtime.wait("b", timeout=10)
    assert await restarted.run_pod(gpu_pod("e", 1)) is True
    assert (await printed(restarted, "e")).split("|")[0] == "GPU-0002-aaaa"
    held = restarted.held_devices()[GPU_RESOURCE]
    assert sorted(held) == [f"GPU-{i:04d}-aaaa" for i in range(4)]


async def test_an_unhealthy_gpu_leaves_allocatable_and_is_not_handed_out(
        make_node: MakeNode, tmp_path: Path) -> None:
    lib = four_gpus()
    devices = gpu_devices(lib)
    node = await make_node(devices=devices)
    lib.xid(1, 13)  # an application's own error: the GPU stays healthy
    assert devices.check_health() is False
    lib.xid(1, 79)  # "GPU has fallen off the bus"
    assert devices.check_health() is True
    # Between the health check and the allocatable update the count still says 4: the
    # assignment itself refuses what it cannot give, with the kubelet's reason.
    assert await node.run_pod(gpu_pod("wide", 4)) is False
    report = node.report("wide")
    assert report is not None and (report.reason, report.message) == (
        "UnexpectedAdmissionError", "Allocate failed due to requested number of devices unavailable for "
                                    "nvidia.com/gpu. Requested: 4, Available: 3")
    node.devices_changed()
    assert (node.capacity[GPU_RESOURCE], node.allocatable[GPU_RESOURCE]) == (4, 3)
    got = []
    for uid in ("p", "q", "r"):
        assert await node.run_pod(gpu_pod(uid, 1)) is True
        got.append((await printed(node, uid)).split("|")[0])
    assert got == ["GPU-0000-aaaa", "GPU-0002-aaaa", "GPU-0003-aaaa"]
    # A failing query makes a GPU unhealthy while it fails; XIDs stay (as NVIDIA's device plugin does).
    lib.gpus[2].broken = True
    assert devices.check_health() is True and devices.allocatable() == {GPU_RESOURCE: 2}
    lib.gpus[2].broken = False
    assert devices.check_health() is True and devices.allocatable() == {GPU_RESOURCE: 3}


async def test_gpu_usage_in_pods_json_and_metrics(make_node: MakeNode, tmp_path: Path) -> None:
    lib = four_gpus()
    node = await make_node(devices=gpu_devices(lib))
    assert await node.run_pod(gpu_pod("train", 2)) is True
    await printed(node, "train")
    lib.gpus[0].used, lib.gpus[0].busy = 10 * GIB, 90
    lib.gpus[1].used, lib.gpus[1].busy = 6 * GIB, 50
    lib.gpus[3].used = 1 * GIB  # no pod holds it: not the pod's
    (pod,) = node.pods_json()
    assert (pod["devices"], pod["gpuMemoryUsedBytes"], pod["gpuUtilizationPercent"]) == (
        {GPU_RESOURCE: ["GPU-0000-aaaa", "GPU-0001-aaaa"]}, 16 * GIB, 70.0)
    # Heartbeats carry the same figures (PodStatus of each pod).
    (status,) = [report_to_proto(r) for r in node.reports(with_usage=True)]
    assert (status.gpu_memory_bytes, status.gpu_utilization_percent) == (16 * GIB, 70.0)
    metrics = AgentMetrics()
    metrics.attach(node, SimpleNamespace(connected=True))
    labels = {"gpu": "0", "UUID": "GPU-0000-aaaa", "modelName": H100, "Hostname": "node-1", "namespace": "ml",
              "pod": "train"}
    assert metrics.registry.get_sample_value("DCGM_FI_DEV_GPU_UTIL", labels) == 90.0
    assert metrics.registry.get_sample_value("DCGM_FI_DEV_FB_USED", labels) == 10 * 1024
    free = {"gpu": "3", "UUID": "GPU-0003-aaaa", "modelName": H100, "Hostname": "node-1", "namespace": "", "pod": ""}
    assert metrics.registry.get_sample_value("DCGM_FI_DEV_FB_USED", free) == 1024
    assert metrics.registry.get_sample_value("sluicegate_node_device_healthy",
                                             {"resource": GPU_RESOURCE, "device": "GPU-0002-aaaa"}) == 1.0


async def test_generic_devices_from_settings_are_exclusive_and_follow_their_paths(
        make_node: MakeNode, tmp_path: Path) -> None:
    paths = [tmp_path / f"fpga{i}" for i in range(3)]
    for p in paths:
        p.touch()
    settings = tmp_path / "agent.yaml"
    settings.write_text(f"devices:\n  - resource: example.com/fpga\n    paths: {json.dumps([str(p) for p in paths])}\n")
    (spec,) = load_settings(str(settings), {}).devices
    assert spec.env == "SLUICEGATE_DEVICES_EXAMPLE_COM_FPGA"
    devices = Devices(declared=(spec,))
    node = await make_node(devices=devices)
    assert node.allocatable["example.com/fpga"] == 3
    var = spec.env
    assert await node.run_pod(gpu_pod("one", 2, resource=spec.resource, var=var)) is True
    assert (await printed(node, "one")).split("|")[0] == f"{paths[0]},{paths[1]}"
    restarted = await make_node(devices=Devices(declared=(spec,)))
    assert await restarted.run_pod(gpu_pod("two", 2, resource=spec.resource, var=var)) is False
    assert reason(restarted, "two") == "OutOfexample.com/fpga"
    # A device whose file is gone is unhealthy; the others are still handed out.
    paths[2].unlink()
    assert restarted.devices is not None and restarted.devices.check_health() is True
    restarted.devices_changed()
    assert restarted.allocatable["example.com/fpga"] == 2
    assert await restarted.run_pod(gpu_pod("three", 1, resource=spec.resource,
                                           var=var)) is False
    assert reason(restarted, "three") == "OutOfexample.com/fpga"


def test_deny_rules_name_every_other_device_file(tmp_path: Path) -> None:
    """cgroup v1 devices.deny rules: each character device the pod was not given (regular files have none)."""
    plain = tmp_path / "plain"
    plain.touch()
    spec = DeviceSpec("example.com/dev", ("/dev/zero", "/dev/full", str(plain)), "DEVS")
    devices = Devices(declared=(spec,))
    assert devices.deny_rules({"example.com/dev": ("/dev/zero",)}) == ()  # not isolating: no rules
    devices.isolate = True
    assert devices.deny_rules({"example.com/dev": ("/dev/zero",)}) == ("c 1:7 rwm",)
    assert devices.deny_rules({}) == ("c 1:5 rwm", "c 1:7 rwm")
    gpus = gpu_devices(four_gpus())
    gpus.isolate = True
    assert [d.path for d in gpus.by_resource[GPU_RESOURCE]] == [f"/dev/nvidia{i}" for i in range(4)]


@pytest.mark.parametrize(("text", "error"), [
    ("devices: {a: 1}", "devices: expected a list"),
    ("devices: [{resource: fpga, paths: [/dev/x]}]", "devices[0].resource: expected an extended resource name"),
    ("devices: [{resource: nvidia.com/gpu, paths: [/dev/x]}]", "devices[0].resource: nvidia.com/gpu is not for "
                                                                "declaring here"),
    ("devices: [{resource: example.com/f, paths: []}]", "devices[0].paths: expected a non-empty list"),
    ("devices: [{resource: example.com/f, paths: [dev/x]}]", "devices[0].paths[0]: expected an absolute path"),
    ("devices: [{resource: example.com/f, paths: [/a]}, {resource: example.com/g, paths: [/b, /a]}]",
     "devices[1].paths[1]: /a is already a device of example.com/f"),
    ("devices: [{resource: example.com/f, paths: [/a]}, {resource: example.com/f, paths: [/b]}]",
     "devices[1].resource: example.com/f is declared twice"),
    ("devices: [{resource: example.com/f, paths: [/a], env: 1X}]", "devices[0].env: expected an environment"),
    ("devices: [{resource: example.com/f, paths: [/a], mode: rw}]", "devices[0].mode: unknown field"),
    ("nvidiaGpus: maybe", "nvidiaGpus: expected true or false"),
    ("deviceHealthInterval: 0s", "deviceHealthInterval: must be a positive duration"),
])
def test_device_settings_errors_name_the_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(text + "\n")
    with pytest.raises(SettingsError) as exc:
        load_settings(str(path), {})
    assert error in str(exc.value)


def test_real_pynvml_discovers_what_the_machine_has() -> None:
    """The real import and NVML path; on a machine with an NVIDIA GPU it finds it, elsewhere it skips."""
    lib: Any = load_pynvml()
    if lib is None:
        pytest.skip("nvidia-ml-py (pynvml) is not installed: pip install 'sluicegate[gpu]'")
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        pytest.skip(f"NVML cannot start here (no NVIDIA driver/GPU): {exc}")
    try:
        count = lib.nvmlDeviceGetCount()
    finally:
        lib.nvmlShutdown()
    if count == 0:
        pytest.skip("NVML found no GPU on this machine")
    nvml, gpus = open_nvml(lib)
    assert nvml is not None
    try:
        devices = Devices(gpus=gpus, nvml=nvml)
        assert devices.capacity() == {GPU_RESOURCE: count}
        assert all(g.uuid.startswith(("GPU-", "MIG-")) and g.memory_bytes > 0 for g in gpus)
        assert int(devices.labels()["nvidia.com/gpu.memory"]) == gpus[0].memory_bytes // MIB
        assert all(nvml.usage(g.uuid) is not None for g in gpus)
    finally:
        nvml.close()
