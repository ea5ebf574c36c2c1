"""NVIDIA GPUs through NVML (the ``nvidia-ml-py`` package, module ``pynvml``): discovery, health, usage.

Everything NVML is here, behind :class:`Nvml`, which takes the library as
a value (``lib``): the agent passes the real ``pynvml`` module (imported
lazily, only when GPUs are wanted; the package is the optional ``[gpu]``
extra), tests pass a fake with the same functions.  Without the package,
without the driver's ``libnvidia-ml``, or with no GPU, :func:`open_nvml`
returns None and says why in one log line: the node then has no GPUs.

Health, as NVIDIA's Kubernetes device plugin judges it: a GPU is unhealthy
once NVML reports a critical XID error on it (sticky: a GPU that lost
itself stays out until the agent restarts), except the XIDs an application
causes by itself (13, 31, 43, 45, 68, 109: its own illegal address, its own
kill), which say nothing about the device; and while a plain query on it
(its memory information) fails.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["APPLICATION_XIDS", "Gpu", "GpuUsage", "Nvml", "load_pynvml", "open_nvml"]

log = logging.getLogger(__name__)

# XIDs an application causes (graphics engine exception, MMU fault of its own
# context, reset channel, preemptive cleanup, video decoder exception, ...):
# not the device's fault, so they do not make it unhealthy.
APPLICATION_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})

# Events read from NVML per health check at most (each check drains what has queued since the last).
MAX_EVENTS_PER_CHECK: Final = 256

MIB: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as NVML reports it: ``index`` in NVML's (PCI bus) order, ``memory_bytes`` total framebuffer."""

    index: int
    uuid: str
    product: str
    memory_bytes: int
    healthy: bool = True
    why: str = ""
    # The N of its device file /dev/nvidiaN (None: NVML could not tell).
    minor: int | None = None


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """What a GPU does now: busy percent over NVML's last sample period, framebuffer bytes in use."""

    utilization_percent: float
    memory_used_bytes: int


def load_pynvml() -> Any | None:
    """The ``pynvml`` module, or None (logged) when the package is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        log.info("no NVIDIA GPUs: the nvidia-ml-py package (pynvml) is not installed "
                 "(pip install 'sluicegate[gpu]' to use GPUs)")
        return None


def _text(value: Any) -> str:
    # Older pynvml versions return bytes.
    return value.decode() if isinstance(value, bytes) else str(value)


class Nvml:
    """An initialised NVML (``lib`` is the pynvml module or a stand-in with its functions)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self._handles: dict[str, Any] = {}
        self._indices: dict[str, int] = {}
        self._events: Any = None
        self._xid_unhealthy: dict[str, str] = {}

    def discover(self) -> list[Gpu]:
        """Every GPU NVML sees, with its health now; a GPU whose queries fail is listed unhealthy."""
        lib = self.lib
        gpus: list[Gpu] = []
        for index in range(int(lib.nvmlDeviceGetCount())):
            try:
                handle = lib.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(lib.nvmlDeviceGetUUID(handle))
            except lib.NVMLError as exc:
                log.error("GPU %d: NVML cannot name it (%s); it is not used", index, exc)
                continue
            self._handles[uuid] = handle
            self._indices[uuid] = index
            try:
                product = _text(lib.nvmlDeviceGetName(handle))
                memory = int(lib.nvmlDeviceGetMemoryInfo(handle).total)
            except lib.NVMLError as exc:
                gpus.append(Gpu(index, uuid, "", 0, healthy=False, why=f"NVML query failed: {exc}"))
                continue
            try:
                minor: int | None = int(lib.nvmlDeviceGetMinorNumber(handle))
            except lib.NVMLError:
                minor = None
            gpus.append(Gpu(index, uuid, product, memory, minor=minor))
        self._watch_xids()
        return gpus

    def _watch_xids(self) -> None:
        lib = self.lib
        try:
            self._events = lib.nvmlEventSetCreate()
            for uuid, handle in self._handles.items():
                try:
                    lib.nvmlDeviceRegisterEvents(handle, lib.nvmlEventTypeXidCriticalError, self._events)
                except lib.NVMLError as exc:
                    log.info("GPU %s: XID events not available (%s); health is checked by queries only", uuid, exc)
        except lib.NVMLError as exc:
            log.info("NVML events not available (%s); GPU health is checked by queries only", exc)
            self._events = None

    def _drain_xids(self) -> None:
        lib = self.lib
        if self._events is None:
            return
        by_handle = {id(h): u for u, h in self._handles.items()}
        for _ in range(MAX_EVENTS_PER_CHECK):
            try:
                event = lib.nvmlEventSetWait(self._events, 0)
            except lib.NVMLError:
                return  # a timeout: nothing more queued
            xid = int(getattr(event, "eventData", 0))
            uuid = by_handle.get(id(event.device))
            if uuid is None:
                try:
                    uuid = _text(lib.nvmlDeviceGetUUID(event.device))
                except lib.NVMLError:
                    continue
            if xid in APPLICATION_XIDS:
                log.info("GPU %s: XID %d (an application's own error; the GPU stays healthy)", uuid, xid)
                continue
            if uuid not in self._xid_unhealthy:
                log.error("GPU %s: critical XID %d; it is taken out of allocatable", uuid, xid)
            self._xid_unhealthy[uuid] = f"critical XID error {xid}"

    def health(self) -> dict[str, str]:
        """The GPUs that are unhealthy now, by UUID, with why (an empty dict: all healthy)."""
        lib = self.lib
        self._drain_xids()
        bad = dict(self._xid_unhealthy)
        for uuid, handle in self._handles.items():
            if uuid in bad:
                continue
            try:
                lib.nvmlDeviceGetMemoryInfo(handle)
            except lib.NVMLError as exc:
                bad[uuid] = f"NVML query failed: {exc}"
        return bad

    def usage(self, uuid: str) -> GpuUsage | None:
        """The GPU's utilisation and memory in use now; None when NVML cannot tell."""
        lib = self.lib
        handle = self._handles.get(uuid)
        if handle is None:
            return None
        try:
            rates = lib.nvmlDeviceGetUtilizationRates(handle)
            memory = lib.nvmlDeviceGetMemoryInfo(handle)
        except lib.NVMLError:
            return None
        return GpuUsage(float(rates.gpu), int(memory.used))

    def close(self) -> None:
        lib = self.lib
        try:
            if self._events is not None:
                lib.nvmlEventSetFree(self._events)
            lib.nvmlShutdown()
        except lib.NVMLError as exc:
            log.debug("NVML shutdown: %s", exc)


def open_nvml(lib: Any | None = None) -> tuple[Nvml | None, list[Gpu]]:
    """Initialise NVML and discover the GPUs: (nvml, gpus), or (None, []) with one log line saying why.

    ``lib``: the pynvml module or a stand-in; None imports the real one.
    """
    if lib is None:
        lib = load_pynvml()
        if lib is None:
            return None, []
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        log.info("no NVIDIA GPUs: NVML could not start (%s)", exc)
        return None, []
    nvml = Nvml(lib)
    try:
        gpus = nvml.discover()
    except lib.NVMLError as exc:
        log.warning("no NVIDIA GPUs: NVML could not list them (%s)", exc)
        nvml.close()
        return None, []
    if not gpus:
        log.info("no NVIDIA GPUs: NVML found none")
        nvml.close()
        return None, []
    log.info("NVIDIA GPUs: %s", ", ".join(f"{g.index}: {g.product} {g.memory_bytes // MIB} MiB {g.uuid}"
                                          f"{'' if g.healthy else ' (unhealthy: ' + g.why + ')'}" for g in gpus))
    return nvml, gpus
