"""The agent's side of the spawner processes (``zygote``): start a command, learn of its exit, reap it.

``Spawners`` starts the root spawner on first use and asks it for one
spawner per (uid, gid, no_new_privs); each ``SpawnerLink`` is one socket.
A start is synchronous (``spawn``: the runtime's restart is one step
nothing interleaves with), the request sent and the reply awaited on the
socket with a deadline, or awaited by the loop (``spawn_async``: a new
pod's start, so that a batch of starts reaches the spawner without each
waiting for the one before); exits arrive on the same socket at any time and
are read by the event loop (``add_reader``) into ``SpawnedChild.exit``.

When a spawner dies (its user killed it, say), the exits it had not
reported are unknown: those children get ``None`` and the runtime waits
for them as for adopted processes.  The next start makes a new spawner.
"""

from __future__ import annotations

import array
import asyncio
import errno
import logging
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sluicegate.agent.runtime.process import Exit, StartFailure

log = logging.getLogger("sluicegate.agent.runtime")

ZYGOTE: Final = str(Path(__file__).with_name("zygote.py"))
# How long a start (or a new spawner) may take before the spawner is given
# up (killed: a process of its user may have stopped it) and replaced.  The
# agent's loop waits meanwhile; a start takes well under a millisecond.  A
# user's spawner can be signalled by that user's processes (its real uid is
# theirs), so a user whose spawner stalled once gets no spawner again: their
# pods start through the wrapper, and no user can stall the agent twice.
REPLY_SECONDS: Final = 2.0
MAX_MESSAGE: Final = 1 << 16
BUFFER_BYTES: Final = 4 << 20
# Released children wait this long for a start to take their reaps to the
# spawner in its message (a pod's exit and the next pod's start come at
# about the same rate); without one, they go in a message of their own.
# The zombies keep their pids (and process groups) meanwhile, as they must
# until released anyway.
REAP_DELAY_SECONDS: Final = 0.05
# A spawner for a user that has had no child for this long is closed.
IDLE_SECONDS: Final = 60.0
# At most this many spawners for users at once: a node whose pods each have
# their own uid would otherwise keep one per running pod.  Past it, a pod of
# a new user starts through the wrapper and setpriv (``has_room``); idle ones
# are closed at once when more than half of them are in use.
MAX_USER_SPAWNERS: Final = 32

Key = tuple[int, int, bool] | None  # (uid, gid, no_new_privs); None: the root spawner


class PlacementFailure(StartFailure):
    """The spawner could not enter a container's cgroup; nothing was started."""


class SpawnerLink:
    """One spawner's socket."""

    def __init__(self, sock: socket.socket, pid: int, key: Key) -> None:
        self.sock = sock
        self.pid = pid
        self.key = key
        sock.setblocking(False)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            sock.setsockopt(socket.SOL_SOCKET, option, BUFFER_BYTES)
        self.children: dict[int, SpawnedChild] = {}
        self.dead = False
        self.stalled = False
        self.idle_since = time.monotonic()
        self._rid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        # Replies awaited by request_async, by request id, with when each is due (in sending order).
        self._waiting: dict[int, tuple[asyncio.Future[tuple[tuple[Any, ...], list[int]]], float]] = {}
        # One timer for all of them (see _overdue), not one per request.
        self._watchdog: asyncio.TimerHandle | None = None
        # Children released and not yet sent to be reaped (see REAP_DELAY_SECONDS), and the timer that sends them.
        self._reaps: list[int] = []
        self._reap_timer: asyncio.TimerHandle | None = None

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is None:
            self._loop = loop
            loop.add_reader(self.sock.fileno(), self._readable)

    def request(self, message: tuple[Any, ...], fds: Sequence[int] = ()) -> tuple[tuple[Any, ...], list[int]]:
        """Send a request and wait for its reply (exits that come first are dispatched)."""
        if self.dead:
            raise StartFailure(f"spawner {self.pid} is gone")
        self._rid += 1
        rid = self._rid
        data = self._encode(message, rid)
        deadline = time.monotonic() + REPLY_SECONDS
        try:
            self._send(data, fds, deadline)
            while True:
                got = self._receive()
                if got is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"no answer in {REPLY_SECONDS:g}s")
                    select.select([self.sock], [], [], remaining)
                    continue
                reply, received = got
                if reply[0] == "exited":
                    self._exited(reply)
                elif reply[1] == rid:
                    return reply, received
                else:
                    self._answer(reply, received)
        except (OSError, EOFError, ValueError) as exc:
            self._die(f"{exc}")
            if isinstance(exc, TimeoutError):
                self.stalled = True
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raise StartFailure(f"the spawner failed: {exc}") from exc

    async def request_async(
        self, message: tuple[Any, ...], fds: Sequence[int] = ()
    ) -> tuple[tuple[Any, ...], list[int]]:
        """Send a request and await its reply while the loop runs on (other starts send theirs meanwhile)."""
        if self.dead or self._loop is None:
            raise StartFailure(f"spawner {self.pid} is gone")
        self._rid += 1
        rid = self._rid
        data = self._encode(message, rid)
        answer: asyncio.Future[tuple[tuple[Any, ...], list[int]]] = self._loop.create_future()
        due = time.monotonic() + REPLY_SECONDS
        self._waiting[rid] = (answer, due)
        if self._watchdog is None:
            self._watchdog = self._loop.call_later(REPLY_SECONDS, self._overdue)
        try:
            self._send(data, fds, due)
            return await answer
        except (OSError, EOFError, ValueError) as exc:
            self._die(f"{exc}")
            if isinstance(exc, TimeoutError):
                self.stalled = True
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raise StartFailure(f"the spawner failed: {exc}") from exc
        finally:
            self._waiting.pop(rid, None)

    def _encode(self, message: tuple[Any, ...], rid: int) -> bytes:
        """A request as sent; a start takes the pending reaps along (the spawner reaps them first)."""
        if message[0] == "spawn" and self._reaps:
            pids, self._reaps = tuple(self._reaps), []
            if self._reap_timer is not None:
                self._reap_timer.cancel()
                self._reap_timer = None
            return marshal.dumps((message[0], rid, *message[1:], pids))
        return marshal.dumps((message[0], rid, *message[1:]))

    def _overdue(self) -> None:
        """The watchdog: fail the requests whose reply is overdue (the first one's failure ends the spawner)."""
        self._watchdog = None
        now = time.monotonic()
        for answer, due in list(self._waiting.values()):
            if due > now:
                # The others were sent later: look again when this one is due.
                if self._loop is not None:
                    self._watchdog = self._loop.call_later(due - now, self._overdue)
                return
            if not answer.done():
                answer.set_exception(TimeoutError(f"no answer in {REPLY_SECONDS:.0f}s"))

    def _answer(self, reply: tuple[Any, ...], received: list[int]) -> None:
        """A reply to a request_async: hand it over (its fds with it), else close its fds."""
        waiting = self._waiting.pop(reply[1], None) if len(reply) > 1 else None
        answer = waiting[0] if waiting is not None else None
        if answer is not None and not answer.done():
            if reply[0] == "started":
                # Known at once: its exit may be the very next message, read
                # before the waiting start resumes.
                self.children[reply[2]] = SpawnedChild(self, reply[2])
            answer.set_result((reply, received))
            return
        for fd in received:
            os.close(fd)

    def _send(self, data: bytes, fds: Sequence[int], deadline: float) -> None:
        while True:
            try:
                if fds:
                    self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                else:
                    self.sock.send(data)
                return
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"could not write in {REPLY_SECONDS:.0f}s") from None
                select.select([], [self.sock], [], remaining)

    def _receive(self) -> tuple[tuple[Any, ...], list[int]] | None:
        """One message, or None when none is waiting; EOFError when the spawner is gone."""
        fds = array.array("i")
        try:
            data, ancillary, _, _ = self.sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(4 * fds.itemsize),
                                                      socket.MSG_CMSG_CLOEXEC)
        except BlockingIOError:
            return None
        if not data:
            raise EOFError("the spawner closed its socket")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        return marshal.loads(data), list(fds)

    def _readable(self) -> None:
        try:
            for _ in range(1024):  # bounded: the rest comes with the next callback
                got = self._receive()
                if got is None:
                    return
                reply, received = got
                if reply[0] == "exited":
                    self._exited(reply)
                else:
                    self._answer(reply, received)
        except (OSError, EOFError, ValueError) as exc:
            self._die(f"{exc}")

    def _exited(self, reply: tuple[Any, ...]) -> None:
        child = self.children.get(reply[1])
        if child is not None:
            child.resolve(Exit(code=reply[2], signal=reply[3]))

    def reap(self, pid: int) -> None:
        """Let the spawner reap ``pid``: with the next start's request, or within ``REAP_DELAY_SECONDS``."""
        self.children.pop(pid, None)
        if not self.children:
            self.idle_since = time.monotonic()
        if self.dead:
            return
        self._reaps.append(pid)
        if self._loop is None:
            self._send_reaps()
        elif self._reap_timer is None:
            self._reap_timer = self._loop.call_later(REAP_DELAY_SECONDS, self._send_reaps)

    def _send_reaps(self) -> None:
        self._reap_timer = None
        pids, self._reaps = self._reaps, []
        if self.dead or not pids:
            return
        try:
            self.sock.send(marshal.dumps(("reap", *pids)))
        except OSError as exc:
            self._die(f"{exc}")

    def _die(self, why: str) -> None:
        if self.dead:
            return
        self.dead = True
        if self.children:
            log.warning("spawner %d ended (%s): the exit status of %d running container(s) is unknown",
                        self.pid, why, len(self.children))
        for child in list(self.children.values()):
            child.lost()
        self.children.clear()
        self.close()

    def close(self) -> None:
        if self._reap_timer is not None:
            self._reap_timer.cancel()
        self._send_reaps()
        self.dead = True
        waiting, self._waiting = self._waiting, {}
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for answer, _ in waiting.values():
            if not answer.done():
                answer.set_exception(EOFError("the spawner's socket was closed"))
        if self._loop is not None:
            self._loop.remove_reader(self.sock.fileno())
            self._loop = None
        self.sock.close()


class SpawnedChild:
    """A process a spawner started: its exit, reported by the spawner, and its release (reaping)."""

    def __init__(self, link: SpawnerLink, pid: int) -> None:
        self.link = link
        self.pid = pid
        self._exit: Exit | None = None
        self._lost = False
        self._future: asyncio.Future[Exit | None] | None = None

    @property
    def pinned(self) -> bool:
        """Whether the pid (hence the process group id) cannot be reused: the spawner has not reaped it."""
        return not self._lost

    def resolve(self, exit: Exit) -> None:
        self._exit = exit
        if self._future is not None and not self._future.done():
            self._future.set_result(exit)

    def lost(self) -> None:
        self._lost = True
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    async def exit(self) -> Exit | None:
        """The exit status; None when the spawner died first (then the process may still run)."""
        if self._exit is not None or self._lost:
            return self._exit
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return await self._future

    def release(self) -> None:
        if not self._lost:
            self.link.reap(self.pid)
            self._lost = True


class Spawners:
    """The root spawner and the per-user ones; starts them when first needed."""

    def __init__(self, *, python: str = sys.executable) -> None:
        self._python = python
        self._links: dict[Key, SpawnerLink] = {}
        # Users whose spawner stalled (see REPLY_SECONDS): they start through the wrapper.
        self.distrusted: set[Key] = set()
        self._root_process: subprocess.Popen[bytes] | None = None

    def pids(self) -> tuple[int, ...]:
        return tuple(link.pid for link in self._links.values() if not link.dead)

    def _root(self) -> SpawnerLink:
        link = self._links.get(None)
        if link is not None and not link.dead:
            return link
        if self._root_process is not None:
            self._root_process.poll()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [self._python, "-I", "-S", ZYGOTE, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise StartFailure(f"could not start the spawner: {exc}") from exc
        finally:
            theirs.close()
        self._root_process = process
        link = self._links[None] = SpawnerLink(ours, process.pid, None)
        return link

    def link(self, key: Key) -> SpawnerLink:
        link = self._links.get(key)
        if link is not None and not link.dead:
            return link
        root = self._root()
        if key is None:
            return root
        uid, gid, no_new_privs = key
        reply, fds = root.request(("fork", uid, gid, no_new_privs))
        if reply[0] != "forked" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise StartFailure(f"the spawner could not make one for uid {uid}: {reply}")
        link = self._links[key] = SpawnerLink(socket.socket(fileno=fds[0]), reply[2], key)
        return link

    def has_room(self, key: Key) -> bool:
        """Whether ``spawn`` can serve ``key`` now (else start through the wrapper)."""
        if key is None:
            return True
        link = self._links.get(key)
        if link is not None and link.stalled:
            self._distrust(key)
        if key in self.distrusted:
            return False
        if key in self._links:
            return True
        self._retire_idle()
        return len(self._links) - (None in self._links) < MAX_USER_SPAWNERS

    def _retire_idle(self) -> None:
        now = time.monotonic()
        crowded = len(self._links) - (None in self._links) > MAX_USER_SPAWNERS // 2
        for key, link in list(self._links.items()):
            if key is None:
                continue
            if link.stalled:
                self._distrust(key)
            elif link.dead or not link.children and (crowded or now - link.idle_since > IDLE_SECONDS):
                link.close()
                del self._links[key]

    def _distrust(self, key: Key) -> None:
        self._links.pop(key, None)
        if key not in self.distrusted:
            self.distrusted.add(key)
            log.warning("the spawner for uid %s stopped answering (a process of that user may have stopped it): "
                        "that user's pods start through the wrapper from now on", key[0] if key else 0)

    def spawn(
        self,
        *,
        key: Key,
        candidates: Sequence[str],
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        places: Sequence[tuple[str, str]],
        log_fd: int,
    ) -> SpawnedChild:
        """Start ``argv`` (the first of ``candidates`` that can be executed); StartFailure says why not."""
        link = self.link(key)
        link.watch(asyncio.get_running_loop())
        reply, fds = link.request(("spawn", tuple(candidates), tuple(argv), dict(env), cwd, tuple(places)), (log_fd,))
        return self._started(link, reply, fds, argv)

    async def spawn_async(
        self,
        *,
        key: Key,
        candidates: Sequence[str],
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        places: Sequence[tuple[str, str]],
        log_fd: int,
    ) -> SpawnedChild:
        """``spawn``, awaiting the reply: the starts of a batch go to the spawner one after another without
        waiting for each other's replies."""
        link = self.link(key)
        link.watch(asyncio.get_running_loop())
        message = ("spawn", tuple(candidates), tuple(argv), dict(env), cwd, tuple(places))
        reply, fds = await link.request_async(message, (log_fd,))
        return self._started(link, reply, fds, argv)

    @staticmethod
    def _started(link: SpawnerLink, reply: tuple[Any, ...], fds: list[int], argv: Sequence[str]) -> SpawnedChild:
        for fd in fds:
            os.close(fd)
        if reply[0] == "started":
            child = link.children.get(reply[2])
            if child is None:
                child = link.children[reply[2]] = SpawnedChild(link, reply[2])
            return child
        stage = reply[4] if len(reply) > 4 else ""
        if stage == "place":
            raise PlacementFailure(str(reply[3]))
        if stage == "exec" and reply[2] in (errno.ENOENT, errno.EACCES, errno.ENOEXEC, errno.ENOTDIR):
            raise StartFailure(f"command {argv[0]!r} could not be executed: {reply[3]}")
        raise StartFailure(str(reply[3]))

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
        process, self._root_process = self._root_process, None
        if process is not None:
            try:
                process.wait(timeout=REPLY_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
