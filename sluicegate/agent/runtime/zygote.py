"""The spawner process: starts pod commands with vfork semantics, placed in their cgroups, as their user.

Run as ``python -I -S zygote.py FD`` by the agent (``spawning``), this
module imports only the standard library.  It is small (a few MiB) and
single-threaded, which is what makes it cheap and safe to start processes
from:

* ``os.posix_spawn`` (glibc: ``clone(CLONE_VM|CLONE_VFORK)``) copies no
  page tables and runs no Python in the child;
* the child starts inside the container's cgroups because this process
  enters them (its pid into each ``cgroup.procs``) right before the spawn
  and leaves them right after: a child starts in its parent's cgroups.
  (cgroup v2's ``CLONE_INTO_CGROUP`` would save the two moves, but Python
  offers no ``clone3``, and calling it through ctypes would run the
  interpreter in a child it never prepared for a fork);
* the user is dropped without an exec in between: a spawner for one
  (uid, gid, no_new_privs) triple has real and saved ids of that user and
  effective id root (it keeps root's capabilities for the cgroup moves),
  no supplementary groups and, where asked, PR_SET_NO_NEW_PRIVS, which
  its children inherit.  ``POSIX_SPAWN_RESETIDS`` makes the child's
  effective ids its real ones, so before exec the child holds the pod's
  ids in all three places: the kernel has cleared its capabilities, and
  exec computes its privileges as for any process of that user (what
  ``setpriv --reuid --regid --clear-groups --no-new-privs`` gives).

A process of that user may signal such a spawner (its real uid is the
user's): it can hurt only the starts and exit codes of its own user's pods,
which it could kill anyway.  That is why there is one spawner per triple,
forked on demand from the root spawner (the one the agent starts, which
keeps root's ids and serves pods that run as root).

The spawner is its children's parent, so it reports their exits: it keeps
a pidfd per child and, when one exits, sends its status without reaping it.
The zombie keeps the pid, hence the process group id, from being reused
until the agent has drained the group and says ``reap``.

Messages are ``marshal``-encoded tuples on a SOCK_SEQPACKET socket; file
descriptors travel as SCM_RIGHTS.  Requests: ``("spawn", rid, candidates,
argv, env, cwd, places[, pids to reap first])`` with the log fd, ``("reap",
pid, ...)`` and, to the
root spawner, ``("fork", rid, uid, gid, no_new_privs)``.  Replies:
``("started", rid, pid)``, ``("failed", rid, errno, message)``,
``("forked", rid, pid)`` with the new spawner's socket, and unprompted
``("exited", pid, code, signal)``.  The spawner exits when its socket
closes (the agent went away); its children live on, as they would have.
"""

from __future__ import annotations

import array
import ctypes
import marshal
import os
import selectors
import signal
import socket
import sys
from typing import Any, Final

PR_SET_NO_NEW_PRIVS: Final = 38
MAX_MESSAGE: Final = 4 << 20
# Dispositions the spawner changes that its children must not inherit.
RESET_SIGNALS: Final = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT)
# At most this many of the agent's cgroup.procs files are kept open (one per hierarchy: a few).
MAX_HOMES: Final = 16


class Spawner:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ, None)
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self.pidfds: dict[int, int] = {}  # pidfd -> pid, children still running
        self.root = True
        # The way back after each start (the agent's own cgroup.procs, the same few
        # files every time), kept open: two syscalls and a path walk less per hierarchy.
        self.homes: dict[str, int] = {}

    # -- messages --

    def send(self, message: tuple[Any, ...], fds: tuple[int, ...] = ()) -> None:
        data = marshal.dumps(message)
        if fds:
            self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.sock.send(data)

    def receive(self) -> tuple[tuple[Any, ...], list[int]] | None:
        fds = array.array("i")
        data, ancillary, _, _ = self.sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(4 * fds.itemsize),
                                                  socket.MSG_CMSG_CLOEXEC)
        if not data:
            return None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        return marshal.loads(data), list(fds)

    # -- the loop --

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    got = self.receive()
                    if got is None:
                        return
                    self.handle(*got)
                else:
                    self.exited(key.fd, key.data)

    def handle(self, message: tuple[Any, ...], fds: list[int]) -> None:
        try:
            kind = message[0]
            if kind == "spawn":
                if len(message) > 7:
                    reap(message[7])
                self.spawn(message[1], message[2], message[3], message[4], message[5], message[6], fds)
            elif kind == "reap":
                reap(message[1:])
            elif kind == "fork" and self.root:
                self.fork(message[1], message[2], message[3], message[4])
        finally:
            for fd in fds:
                os.close(fd)

    def exited(self, pidfd: int, pid: int) -> None:
        if pid < 0:  # a spawner forked for a user (see fork): reaped, not reported
            self.reap_spawner(pidfd, -pid)
            return
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None:
            return
        self.selector.unregister(pidfd)
        os.close(pidfd)
        del self.pidfds[pidfd]
        if info.si_code == os.CLD_EXITED:
            self.send(("exited", pid, info.si_status, None))
        else:
            self.send(("exited", pid, 128 + info.si_status, info.si_status))

    # -- spawning --

    def spawn(self, rid: int, candidates: tuple[str, ...], argv: tuple[str, ...], env: dict[str, str], cwd: str,
              places: tuple[tuple[str, str], ...], fds: list[int]) -> None:
        log_fd = fds[0]
        actions = [(os.POSIX_SPAWN_DUP2, self.devnull, 0), (os.POSIX_SPAWN_DUP2, log_fd, 1),
                   (os.POSIX_SPAWN_DUP2, log_fd, 2)]
        try:
            os.chdir(cwd)
        except OSError as exc:
            self.send(("failed", rid, exc.errno or 0, f"working directory {cwd!r}: {exc.strerror}", "cwd"))
            return
        pid = 0
        failure: tuple[Any, ...] | None = None
        error: OSError | None = None
        mine = str(os.getpid()).encode()
        entered = 0
        for enter, _ in places:
            try:
                _write(enter, mine)
            except OSError as exc:
                failure = ("failed", rid, exc.errno or 0, f"could not enter cgroup {enter}: {exc.strerror}", "place")
                break
            entered += 1
        if failure is None:
            for path in candidates:
                try:
                    pid = os.posix_spawn(path, argv, env, file_actions=actions, setsid=True,
                                         setsigdef=RESET_SIGNALS, resetids=not self.root)
                    break
                except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
                    # As execvp: look further along PATH, report the first "permission denied".
                    if error is None or isinstance(exc, PermissionError) and not isinstance(error, PermissionError):
                        error = exc
                except OSError as exc:
                    error = exc
                    break
        stuck = False
        for _, home in places[:entered]:
            try:
                self.go_home(home, mine)
            except OSError:
                stuck = True
        if pid:
            pidfd = os.pidfd_open(pid)
            self.pidfds[pidfd] = pid
            self.selector.register(pidfd, selectors.EVENT_READ, pid)
            self.send(("started", rid, pid))
        elif failure is not None:
            self.send(failure)
        else:
            where = f" ({error.filename})" if error is not None and error.filename else ""
            text = (error.strerror or str(error)) if error is not None else "no command to execute"
            self.send(("failed", rid, error.errno or 0 if error is not None else 0, f"{text}{where}", "exec"))
        if stuck:
            # Left inside a pod's cgroups: end, the agent starts another.
            # What was started stands: it was placed.
            sys.exit(3)

    def go_home(self, home: str, mine: bytes) -> None:
        """Back into one of the agent's cgroups, through the file kept open for it (opened again once if need be)."""
        fd = self.homes.get(home)
        if fd is not None:
            try:
                os.write(fd, mine)
                return
            except OSError:
                del self.homes[home]
                os.close(fd)
        fd = os.open(home, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, mine)
        except OSError:
            os.close(fd)
            raise
        if len(self.homes) < MAX_HOMES:
            self.homes[home] = fd
        else:
            os.close(fd)

    def fork(self, rid: int, uid: int, gid: int, no_new_privs: bool) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                theirs.close()
                self.selector.close()
                self.sock.close()
                for pidfd in self.pidfds:
                    os.close(pidfd)
                for fd in self.homes.values():
                    os.close(fd)
                become(uid, gid, no_new_privs)
                child = Spawner(ours)
                child.root = False
                child.serve()
            finally:
                os._exit(0)
        ours.close()
        self.send(("forked", rid, pid), (theirs.fileno(),))
        theirs.close()
        # Reaped by us when it ends; nothing waits for it.
        pidfd = os.pidfd_open(pid)
        self.selector.register(pidfd, selectors.EVENT_READ, -pid)
        self.pidfds[pidfd] = -pid

    def reap_spawner(self, pidfd: int, pid: int) -> None:
        self.selector.unregister(pidfd)
        os.close(pidfd)
        del self.pidfds[pidfd]
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)


def reap(pids: tuple[int, ...]) -> None:
    """Reap exited children the agent has released (their pids are free for reuse from now on)."""
    for pid in pids:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            pass


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def become(uid: int, gid: int, no_new_privs: bool) -> None:
    """Real and saved ids of the pod's user, effective root, no groups (see the module docstring)."""
    os.setgroups([])
    os.setresgid(gid, 0, gid)
    os.setresuid(uid, 0, uid)
    if no_new_privs:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def main(argv: list[str]) -> None:
    # Interrupts are for the agent; the spawner ends when its socket does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    sock.set_inheritable(False)
    Spawner(sock).serve()


if __name__ == "__main__":
    main(sys.argv)
