"""Readiness probes: exec, TCP and HTTP checks with the kubelet's thresholds.

A container with a probe is ready once the probe succeeded
``successThreshold`` times in a row, and unready again after
``failureThreshold`` consecutive failures.  A container without a probe is
ready while it runs.  Each probed container gets one task; a change of
readiness is announced through ``on_change(uid)`` so the agent reports it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    exec_command: tuple[str, ...] = ()
    tcp_port: int = 0
    http_path: str = ""
    http_port: int = 0
    initial_delay_seconds: float = 0.0
    period_seconds: float = 10.0
    timeout_seconds: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    def to_json(self) -> dict[str, object]:
        return {"exec": list(self.exec_command), "tcpPort": self.tcp_port, "httpPath": self.http_path,
                "httpPort": self.http_port, "initialDelay": self.initial_delay_seconds, "period": self.period_seconds,
                "timeout": self.timeout_seconds, "success": self.success_threshold, "failure": self.failure_threshold}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ProbeSpec:
        return ProbeSpec(
            exec_command=tuple(str(x) for x in d.get("exec", []) or []),
            tcp_port=int(d.get("tcpPort", 0) or 0),
            http_path=str(d.get("httpPath", "") or ""),
            http_port=int(d.get("httpPort", 0) or 0),
            initial_delay_seconds=float(d.get("initialDelay", 0) or 0),
            period_seconds=float(d.get("period", 10) or 10),
            timeout_seconds=float(d.get("timeout", 1) or 1),
            success_threshold=int(d.get("success", 1) or 1),
            failure_threshold=int(d.get("failure", 3) or 3),
        )


async def check(spec: ProbeSpec, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                prefix: Sequence[str] = ()) -> bool:
    """Run the probe once; True on success (exit 0, a TCP connect, HTTP 2xx/3xx).

    ``prefix`` goes before an exec probe's command: the pod's user switch
    (see ``sluicegate.agent.runtime.privilege_argv``), so the probe runs as the pod does.
    """
    try:
        if spec.exec_command:
            proc = await asyncio.create_subprocess_exec(
                *prefix, *spec.exec_command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=cwd or None, start_new_session=True,
            )
            try:
                return await asyncio.wait_for(proc.wait(), timeout=spec.timeout_seconds) == 0
            except TimeoutError:
                proc.kill()
                await proc.wait()
                return False
        if spec.tcp_port:
            connecting = asyncio.open_connection("127.0.0.1", spec.tcp_port)
            _, writer = await asyncio.wait_for(connecting, spec.timeout_seconds)
            writer.close()
            return True
        if spec.http_port:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", spec.http_port),
                                                    spec.timeout_seconds)
            try:
                writer.write(f"GET {spec.http_path or '/'} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
                await writer.drain()
                line = await asyncio.wait_for(reader.readline(), spec.timeout_seconds)
            finally:
                writer.close()
            parts = line.split()
            return len(parts) >= 2 and parts[1][:1] in (b"2", b"3")
    except (OSError, TimeoutError):
        return False
    return False


class ReadinessProbes:
    def __init__(self, on_change: Callable[[str], None]) -> None:
        self.on_change = on_change
        self._ready: dict[tuple[str, str], bool] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}

    def has_probe(self, uid: str, container: str) -> bool:
        return (uid, container) in self._ready

    def ready(self, uid: str, container: str) -> bool:
        return self._ready.get((uid, container), False)

    def start(self, uid: str, container: str, spec: ProbeSpec, *, env: Mapping[str, str] | None = None,
              cwd: str | None = None, prefix: Sequence[str] = ()) -> None:
        key = (uid, container)
        if key in self._tasks:
            return
        self._ready[key] = False
        self._tasks[key] = asyncio.create_task(self._run(key, spec, env, cwd, tuple(prefix)),
                                               name=f"probe-{uid}-{container}")

    def stop(self, uid: str) -> None:
        for key in [k for k in self._tasks if k[0] == uid]:
            self._tasks.pop(key).cancel()
            self._ready.pop(key, None)

    async def _run(self, key: tuple[str, str], spec: ProbeSpec, env: Mapping[str, str] | None, cwd: str | None,
                   prefix: tuple[str, ...] = ()) -> None:
        await asyncio.sleep(spec.initial_delay_seconds)
        successes = failures = 0
        while True:
            ok = await check(spec, env=env, cwd=cwd, prefix=prefix)
            if ok:
                successes, failures = successes + 1, 0
            else:
                successes, failures = 0, failures + 1
            was = self._ready.get(key, False)
            now = True if successes >= spec.success_threshold else (
                False if failures >= spec.failure_threshold else was)
            if now != was:
                self._ready[key] = now
                log.info("pod %s container %s is %s", key[0], key[1], "ready" if now else "not ready")
                self.on_change(key[0])
            await asyncio.sleep(spec.period_seconds)
