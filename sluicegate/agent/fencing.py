"""Self-fencing: an agent cut off from the controller stops its pods by itself.

The controller requeues a silent node's workloads once the node timeout plus
a fencing grace have passed (see :mod:`sluicegate.controller.settings`); a
node that is alive but cut off must have stopped them by then, or a workload
would run on two nodes at once.  So the agent counts the same timeout, which
the controller sends in ``Registered`` (both ends use one number), and once it
has not heard from the controller for that long it stops every non-static pod
the normal way (SIGTERM, the pod's grace, SIGKILL) with reason ``NodeFenced``.
Static pods keep running: they do not belong to the controller.

"Heard" is conservative: a heartbeat counts from when the agent *sent* it,
once the controller acknowledges it, and a registration from when the
Register was sent.  The controller's clock for the node starts when it
processes a heartbeat, which is later, so the agent always fences first.
Other controller messages do not count: they do not tell that the
controller still hears the agent.

The contract and the last time heard are kept in ``fencing.json`` in the
agent's data directory: an agent restarted while cut off (same boot: the
monotonic clock is the machine's) still fences on time.  A write is skipped
when the last one is younger than a check period, so the file may be that
much behind: the agent then fences that much earlier, never later.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sluicegate.agent.checkpoint import AtomicFile

log = logging.getLogger(__name__)

STATE_FILE = "fencing.json"
FENCED_REASON = "NodeFenced"
# Check period bounds (seconds): at most a quarter of the timeout, at most a second.
MAX_CHECK_PERIOD = 1.0
MIN_CHECK_PERIOD = 0.02


@dataclass(frozen=True, slots=True)
class Contract:
    """The timing the controller sent in Registered."""

    node_timeout: float
    fencing_grace: float
    self_fencing: bool


class FencedNode(Protocol):
    """What fencing needs of :class:`~sluicegate.agent.node.AgentNode`."""

    def running_controller_pods(self) -> Sequence[str]: ...

    async def stop_pod(self, uid: str, *, grace_seconds: float | None, reason: str, message: str) -> None: ...


class SelfFencing:
    def __init__(
        self,
        *,
        node: FencedNode,
        data_dir: Path | None,
        boot_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.boot_id = boot_id
        self.clock = clock
        self.contract: Contract | None = None
        self.last_heard = clock()
        # True from the moment the pods were stopped until the controller is heard again.
        self.fenced = False
        self.episodes = 0
        self._file = AtomicFile(data_dir / STATE_FILE, mode=0o644) if data_dir is not None else None
        self._written_at: float | None = None
        self._changed = asyncio.Event()
        self._stopping: set[asyncio.Task[None]] = set()
        if data_dir is not None:
            self._load(data_dir / STATE_FILE)

    # ---------------------------------------------------------------- state

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text())
            self.contract = Contract(float(raw["nodeTimeout"]), float(raw["fencingGrace"]), bool(raw["selfFencing"]))
            if raw.get("bootId") == self.boot_id and self.boot_id:
                # The same machine clock: the silence goes on from when the previous agent last heard.
                self.last_heard = min(self.clock(), float(raw["lastHeard"]))
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.error("cannot read %s (%s); self-fencing waits for the controller's timing", path, exc)
            self.contract = None
            return
        log.info("self-fencing: node timeout %gs (%s), last heard from the controller %.1fs ago",
                 self.contract.node_timeout, "on" if self.contract.self_fencing else "off",
                 self.clock() - self.last_heard)

    def _save(self, *, force: bool = False) -> None:
        if self._file is None or self.contract is None:
            return
        now = self.clock()
        if not force and self._written_at is not None and now - self._written_at < self.period():
            return
        data = {"bootId": self.boot_id, "lastHeard": self.last_heard, "nodeTimeout": self.contract.node_timeout,
                "fencingGrace": self.contract.fencing_grace, "selfFencing": self.contract.self_fencing}
        try:
            self._file.replace(json.dumps(data).encode())
            self._written_at = now
        except OSError as exc:
            log.error("cannot write %s: %s", self._file.path, exc.strerror or exc)

    def period(self) -> float:
        timeout = self.contract.node_timeout if self.contract is not None else 4 * MAX_CHECK_PERIOD
        return max(MIN_CHECK_PERIOD, min(MAX_CHECK_PERIOD, timeout / 4))

    # -------------------------------------------------------------- events

    def registered(self, contract: Contract, *, sent_at: float) -> None:
        """The controller acknowledged a Register sent at ``sent_at`` (this clock)."""
        if contract != self.contract:
            log.info("self-fencing %s: node timeout %gs, fencing grace %gs",
                     "on" if contract.self_fencing else "off", contract.node_timeout, contract.fencing_grace)
        self.contract = contract
        self.heard(sent_at, force_save=True)

    def heard(self, sent_at: float, *, force_save: bool = False) -> None:
        """The controller processed what this agent sent at ``sent_at``."""
        if sent_at > self.last_heard:
            self.last_heard = sent_at
        if self.fenced and self.clock() - self.last_heard <= self._timeout():
            log.warning("the controller is reachable again; pods stopped while cut off were reported to it")
            self.fenced = False
        self._save(force=force_save)
        self._changed.set()

    def _timeout(self) -> float:
        return self.contract.node_timeout if self.contract is not None else float("inf")

    def silence(self) -> float:
        return self.clock() - self.last_heard

    # ----------------------------------------------------------------- loop

    def check(self) -> bool:
        """Fence if the silence has reached the node timeout; True when pods were stopped now."""
        c = self.contract
        if c is None or not c.self_fencing or self.fenced:
            return False
        silence = self.silence()
        if silence <= c.node_timeout:
            return False
        self.fenced = True
        self.episodes += 1
        uids = list(self.node.running_controller_pods())
        message = (f"the agent has not heard from the controller for {silence:.1f}s (node timeout "
                   f"{c.node_timeout:g}s): it stopped the pod so that its workload, which the controller "
                   "requeues, never runs twice")
        log.warning("cut off from the controller for %.1fs (node timeout %gs): stopping %d pod(s) "
                    "(self-fencing); static pods keep running", silence, c.node_timeout, len(uids))
        for uid in uids:
            task = asyncio.create_task(
                self.node.stop_pod(uid, grace_seconds=None, reason=FENCED_REASON, message=message),
                name=f"fence-{uid}")
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        return True

    async def run(self) -> None:
        """Check the silence at most every period (timers bounded by it), for as long as the agent runs."""
        while True:
            self.check()
            delay = self.period()
            if self.contract is not None and not self.fenced:
                delay = min(delay, max(MIN_CHECK_PERIOD, self.last_heard + self.contract.node_timeout - self.clock()))
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=delay)
            except TimeoutError:
                pass
