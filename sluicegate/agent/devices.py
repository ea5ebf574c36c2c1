"""Devices a pod holds exclusively: NVIDIA GPUs (from :mod:`sluicegate.agent.nvml`) and declared generic devices.

A device resource (``nvidia.com/gpu``, or one declared in the settings'
``devices:``) is a set of devices, each with an id: a GPU's UUID, a generic
device's path.  Following the kubelet's device manager, the node's
capacity counts every device and its allocatable only the healthy ones;
the node labels are those of NVIDIA's GPU feature discovery
(``nvidia.com/gpu.product`` with spaces as ``-``, ``nvidia.com/gpu.memory``
in MiB, ``nvidia.com/gpu.count``).

A pod that requests N of a resource is given N healthy devices that no
other admitted pod holds (lowest index first); the node records the ids
in the pod's checkpoint record, which is what "held" is read from, so a
restarted agent hands out nothing twice.  The pod's containers see their
share in their environment:

* GPUs: ``NVIDIA_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES`` set to the
  UUIDs, comma-separated -- what NVIDIA's device plugin passes by default
  (its ``uuid`` device-id strategy): a UUID names the same GPU whatever
  ``CUDA_DEVICE_ORDER`` a program uses (CUDA's own numbering is fastest
  first, not NVML's PCI order, so an index could name another pod's GPU);
* generic devices: the resource's ``env`` variable (default
  ``SLUICEGATE_DEVICES_<RESOURCE>``, e.g. ``SLUICEGATE_DEVICES_EXAMPLE_COM_FPGA``)
  set to the paths, comma-separated.

Isolation: where the agent runs pods in cgroup v1 with the devices
hierarchy (``isolate``), each container is denied every device file of the
node's device resources but its pod's (:meth:`Devices.deny_rules`, written
to ``devices.deny``); on cgroup v2 (which would need a BPF device program)
and without cgroups, isolation is by environment only.

Health: a GPU as NVML says (see :mod:`sluicegate.agent.nvml`); a generic
device is healthy while its path exists.  :meth:`Devices.check_health`
re-reads it; the caller reports a change of allocatable.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from sluicegate.agent.nvml import MIB, Gpu, Nvml
from sluicegate.agent.settings import GPU_RESOURCE, DeviceSpec

__all__ = ["GPU_ENV", "GPU_RESOURCE", "Device", "DeviceShortage", "Devices", "pick"]

log = logging.getLogger(__name__)

# The variables a pod's GPUs are named in (NVIDIA's container toolkit reads the first, CUDA the second).
GPU_ENV: Final = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True, slots=True)
class Device:
    resource: str
    id: str  # a GPU's UUID; a generic device's path
    index: int
    healthy: bool = True
    why: str = ""
    # Its device file ("" unknown): a generic device's path, a GPU's /dev/nvidiaN.
    path: str = ""


class DeviceShortage(Exception):
    """Fewer healthy free devices of ``resource`` than a pod requests (the kubelet's UnexpectedAdmissionError)."""

    def __init__(self, resource: str, requested: int, available: int) -> None:
        self.resource = resource
        self.requested = requested
        self.available = available
        super().__init__(f"Allocate failed due to requested number of devices unavailable for {resource}. "
                         f"Requested: {requested}, Available: {available}")


def pick(devices: Sequence[Device], held: Iterable[str], want: int) -> tuple[str, ...] | None:
    """The ids of ``want`` healthy devices not in ``held``, lowest index first; None if there are fewer."""
    taken = set(held)
    free = sorted((d for d in devices if d.healthy and d.id not in taken), key=lambda d: d.index)
    if len(free) < want:
        return None
    return tuple(d.id for d in free[:want])


class Devices:
    """The node's device resources.  ``nvml``: an initialised NVML with ``gpus`` discovered (None: no GPUs)."""

    def __init__(self, *, gpus: Sequence[Gpu] = (), nvml: Nvml | None = None,
                 declared: Sequence[DeviceSpec] = ()) -> None:
        self.nvml = nvml
        self.gpus: dict[str, Gpu] = {g.uuid: g for g in gpus}
        self.specs: dict[str, DeviceSpec] = {d.resource: d for d in declared}
        self.by_resource: dict[str, list[Device]] = {}
        if gpus:
            self.by_resource[GPU_RESOURCE] = [
                Device(GPU_RESOURCE, g.uuid, g.index, g.healthy, g.why,
                       path=f"/dev/nvidia{g.minor}" if g.minor is not None else "") for g in gpus]
        for spec in declared:
            self.by_resource[spec.resource] = [Device(spec.resource, p, i, path=p) for i, p in enumerate(spec.paths)]
        # Set by the agent where pods get a cgroup v1 devices cgroup: deny_rules() then applies.
        self.isolate = False
        self.check_health()

    def manages(self, resource: str) -> bool:
        return resource in self.by_resource

    def capacity(self) -> dict[str, int]:
        return {r: len(ds) for r, ds in self.by_resource.items()}

    def allocatable(self) -> dict[str, int]:
        return {r: sum(1 for d in ds if d.healthy) for r, ds in self.by_resource.items()}

    def labels(self) -> dict[str, str]:
        """GPU feature discovery's labels (of the first GPU, as it assumes one model per node)."""
        if not self.gpus:
            return {}
        first = min(self.gpus.values(), key=lambda g: g.index)
        return {"nvidia.com/gpu.product": first.product.replace(" ", "-"),
                "nvidia.com/gpu.memory": str(first.memory_bytes // MIB),
                "nvidia.com/gpu.count": str(len(self.gpus))}

    def assign(self, requests: Mapping[str, int], held: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
        """Devices for a pod's ``requests`` (only the resources managed here), given what others ``held``.

        Raises DeviceShortage naming the first resource short (nothing is assigned then).
        """
        out: dict[str, tuple[str, ...]] = {}
        for resource, want in sorted(requests.items()):
            devices = self.by_resource.get(resource)
            if devices is None or want <= 0:
                continue
            ids = pick(devices, held.get(resource, ()), want)
            if ids is None:
                taken = set(held.get(resource, ()))
                raise DeviceShortage(resource, want, sum(1 for d in devices if d.healthy and d.id not in taken))
            out[resource] = ids
        return out

    def env(self, assigned: Mapping[str, Sequence[str]]) -> tuple[tuple[str, str], ...]:
        """The variables naming a pod's devices (added after the pod's own, so they win)."""
        out: list[tuple[str, str]] = []
        for resource, ids in sorted(assigned.items()):
            value = ",".join(ids)
            if resource == GPU_RESOURCE:
                out.extend((name, value) for name in GPU_ENV)
            elif resource in self.specs:
                out.append((self.specs[resource].env, value))
        return tuple(out)

    def deny_rules(self, assigned: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
        """cgroup v1 devices.deny rules for every device file but the pod's own (none unless ``isolate``).

        Only character and block devices have rules; a path that is another
        kind of file (or missing) has none.
        """
        if not self.isolate:
            return ()
        rules: list[str] = []
        for resource, devices in sorted(self.by_resource.items()):
            mine = set(assigned.get(resource, ()))
            for d in devices:
                if d.id in mine or not d.path:
                    continue
                try:
                    info = os.stat(d.path)
                except OSError:
                    continue
                kind = "c" if stat.S_ISCHR(info.st_mode) else "b" if stat.S_ISBLK(info.st_mode) else ""
                if kind:
                    rules.append(f"{kind} {os.major(info.st_rdev)}:{os.minor(info.st_rdev)} rwm")
        return tuple(rules)

    def check_health(self) -> bool:
        """Re-read every device's health; True when some device's health changed."""
        bad: dict[str, str] = self.nvml.health() if self.nvml is not None else {}
        changed = False
        for resource, devices in self.by_resource.items():
            for i, d in enumerate(devices):
                if resource == GPU_RESOURCE:
                    gpu = self.gpus[d.id]
                    why = bad.get(d.id, "" if gpu.healthy else gpu.why)
                else:
                    why = "" if os.path.exists(d.id) else f"{d.id} does not exist"
                healthy = not why
                if healthy != d.healthy:
                    changed = True
                    if healthy:
                        log.info("%s device %s is healthy again", resource, d.id)
                    else:
                        log.error("%s device %s is unhealthy (%s): not handed out", resource, d.id, why)
                devices[i] = replace(d, healthy=healthy, why=why)
        return changed

    def unhealthy(self) -> dict[str, list[Device]]:
        return {r: [d for d in ds if not d.healthy] for r, ds in self.by_resource.items()}

    def gpu_index(self, uuid: str) -> int | None:
        gpu = self.gpus.get(uuid)
        return gpu.index if gpu is not None else None

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.close()
