"""Process plumbing: exits via pidfd, process groups, signals, privilege dropping and command checks."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from sluicegate.agent.monitor import read_stat
from sluicegate.agent.pod import RunAs
from sluicegate.agent.runtime.values import DEFAULT_PATH


async def readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not future.done():
            future.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await future
    finally:
        loop.remove_reader(fd)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=max(0.0, timeout))
    finally:
        waiter.cancel()
    return event.is_set()


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        # No pidfd (kernel < 5.3) or the process is already gone: callers
        # fall back to polling /proc with a bounded interval.
        return None


@dataclass(slots=True)
class Exit:
    code: int | None
    signal: int | None


class Child(Protocol):
    """A main process this agent started: its exit status while it is pinned (not reaped)."""

    @property
    def pid(self) -> int: ...

    @property
    def pinned(self) -> bool:
        """Whether the pid, hence the process group id, cannot be reused yet (the child is not reaped)."""
        ...

    async def exit(self) -> Exit | None:
        """The exit status once it ended; None when it can no longer be known (the process may still run)."""
        ...

    def release(self) -> None:
        """Reap it (after its group was drained)."""
        ...


class PopenChild:
    """A child of the agent itself (the wrapper path): exits through its pidfd and ``waitid``."""

    def __init__(self, popen: subprocess.Popen[bytes], *, poll_seconds: float) -> None:
        self.popen = popen
        self.pidfd = open_pidfd(popen.pid)
        self._poll_seconds = poll_seconds
        self._released = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def pinned(self) -> bool:
        return not self._released

    async def exit(self) -> Exit | None:
        pid = self.popen.pid
        while True:
            if self.pidfd is not None:
                await readable(self.pidfd)
            # WNOWAIT leaves the child a zombie until its group is drained: a
            # zombie keeps its pid, hence the group id, from being reused, so
            # killpg() cannot hit an unrelated group while we clean up.
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            except ChildProcessError:
                return None
            if info is None:
                await asyncio.sleep(self._poll_seconds)
                continue
            if info.si_code == os.CLD_EXITED:
                return Exit(code=info.si_status, signal=None)
            return Exit(code=128 + info.si_status, signal=info.si_status)

    def release(self) -> None:
        self._released = True
        try:
            self.popen.wait(timeout=0.5)
        except (subprocess.TimeoutExpired, ChildProcessError):
            pass
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


@dataclass(slots=True)
class Proc:
    """A watched main process: our child (``child``) or adopted from a checkpoint (``pidfd``, if any)."""

    pid: int
    start_ticks: int
    child: Child | None
    pidfd: int | None

    def alive(self) -> bool:
        stat = read_stat(self.pid)
        return stat is not None and stat.start_ticks == self.start_ticks and not stat.exited

    def release(self) -> None:
        if self.child is not None:
            self.child.release()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class StartFailure(Exception):
    """A container cannot be started; the message says why (reported as StartError)."""


HOME_DIR: Final = "home"


def append_line(path: Path, line: str) -> None:
    # Best effort: the log is where a user looks first, but failing to write
    # it must not hide the start error itself.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        with open(fd, "a") as log_file:
            log_file.write(line + "\n")
    except OSError:
        pass


# How many (command, PATH) lookups command_problem remembers; past it, it starts over.
FOUND_LIMIT: Final = 256


def command_problem(
    command: str, env: Mapping[str, str], cwd: str, *, found: dict[tuple[str, str], str]
) -> str | None:
    """Why ``command`` cannot be started, or None.

    ``found`` remembers where a bare command name was found in a PATH: the
    next start checks that file again (two system calls) instead of trying
    every PATH entry before it.  A command that disappeared is looked up
    anew; the check only has to tell a missing command from a present one,
    the exec itself searches PATH as always.
    """
    if not os.path.isdir(cwd):
        return f"working directory {cwd!r} does not exist"
    if "/" in command:
        path = command if os.path.isabs(command) else os.path.join(cwd, command)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"command {command!r} is not an executable file"
        return None
    search = env.get("PATH", os.defpath)
    key = (command, search)
    known = found.get(key)
    # shutil.which's test for a match: executable and not a directory.
    if known is not None and os.access(known, os.X_OK) and not os.path.isdir(known):
        return None
    where = shutil.which(command, path=search)
    if where is None:
        found.pop(key, None)
        return f"command {command!r} was not found in PATH={search}"
    if len(found) >= FOUND_LIMIT:
        found.clear()
    found[key] = where
    return None


# setpriv (util-linux) drops to the pod's user right before the command: it
# runs after placement (the v2 / fallback placement wrapper must still be
# root to enter the cgroups) and is the one place no_new_privs is set
# without preexec_fn (unsafe in the agent's threaded process, see cgroups).
SETPRIV: Final = shutil.which("setpriv", path=DEFAULT_PATH)


def privilege_argv(run_as: RunAs | None) -> list[str]:
    """What goes before a pod's command so it runs as ``run_as`` ([] when nothing changes)."""
    if run_as is None:
        return []
    if SETPRIV is None:
        raise StartFailure("starting a pod as its own user needs setpriv (util-linux), which is not on this node")
    out = [SETPRIV, f"--reuid={run_as.uid}", f"--regid={run_as.gid}", "--clear-groups"]
    if run_as.no_new_privs:
        out.append("--no-new-privs")
    out.append("--")
    return out
