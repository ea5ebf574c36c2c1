"""The systemd service notification protocol, spoken directly.

systemd hands a ``Type=notify`` service the address of a datagram socket in
``NOTIFY_SOCKET``. The service sends newline-separated ``NAME=value``
assignments to it: ``READY=1`` once it serves, ``STATUS=...`` for
``systemctl status``, ``STOPPING=1`` when shutdown begins, ``RELOADING=1``
around a configuration reload and ``WATCHDOG=1`` as the keep-alive for
``WatchdogSec=``. See sd_notify(3) and systemd.service(5).

Outside systemd (a developer's shell, the test suite) ``NOTIFY_SOCKET`` is
unset and every call is a no-op.

Why this is written here rather than taken from a library (issue 16 asked
for a maintained one unless this is smaller and safer; weighed in 2026-11):

* The protocol is one ``sendto`` of a datagram on an AF_UNIX socket; the
  part of this module that speaks it is about 110 lines with their
  docstrings, over the standard library, tested against a stand-in notify
  socket (tests/common/test_sdnotify.py, and the daemon test in
  test_supervise.py).
* ``systemd-python`` (the libsystemd bindings, 235) has no wheel: it needs a
  C compiler and the libsystemd headers on every host that installs
  sluicegate, or Debian's ``python3-systemd`` outside the virtualenv. That
  breaks the plain ``pip install`` of the wheel that issue 16 item 1 asks for.
* ``cysystemd`` (2.0.5, maintained) ships a manylinux_2_34 wheel that vendors
  libsystemd with libgcrypt, liblzma, liblz4, libzstd and libcap: about 6 MB
  of native code to send one datagram, and hosts with an older glibc or
  another architecture fall back to building it. Its ``notify`` sends one
  assignment per call, and it exposes nothing for the watchdog settings.
* ``sdnotify`` (0.3.2, 2017) is unmaintained and hides every send failure.

What this module does that matters here, and none of them give as a whole:
abstract-namespace addresses (``@name``); a bounded send, so a stuck PID 1
cannot stall the event loop; a non-inheritable socket, and the list of
variables pod environments must not inherit (:data:`NOTIFY_ENVIRONMENT`);
``WATCHDOG_USEC``/``WATCHDOG_PID`` checked (a watchdog meant for a parent is
not ours) and the keep-alive task that withholds pings while unhealthy; a
clear refusal of an address it cannot use; one warning per failure episode.
Not supported: the ``vsock:`` addresses systemd 254+ can hand to services in
VMs, which are refused at start with :class:`NotifySocketError`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import Final

__all__ = [
    "NOTIFY_ENVIRONMENT",
    "Notifier",
    "NotifySocketError",
    "WatchdogEnvironmentError",
    "watchdog_interval",
    "watchdog_task",
]

logger = logging.getLogger(__name__)

# The variables systemd sets for the main process only. Anything the agent
# launches (pod processes) must not see them: a pod that sent READY=1 or
# WATCHDOG=1 would speak for the agent. NotifyAccess=main makes systemd ignore
# such messages, but the runtime should still strip these keys from pod
# environments rather than rely on that.
NOTIFY_ENVIRONMENT: Final = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")

# How long one send may block. systemd drains its notify socket promptly, so a
# send only blocks when PID 1 itself is stuck; bounding it keeps a stuck PID 1
# from stalling our event loop for longer than this.
DEFAULT_SEND_TIMEOUT: Final = 1.0


class NotifySocketError(Exception):
    """``NOTIFY_SOCKET`` holds an address this module cannot send to."""

    def __init__(self, *, address: str, problem: str) -> None:
        self.address = address
        self.problem = problem
        super().__init__(
            f"NOTIFY_SOCKET={address!r} is not usable: {problem}; wanted an absolute "
            f"socket path or an abstract name starting with '@'. The service cannot "
            f"report readiness to systemd, so it refuses to start."
        )


class WatchdogEnvironmentError(Exception):
    """``WATCHDOG_USEC`` or ``WATCHDOG_PID`` holds something other than what systemd sets."""

    def __init__(self, *, variable: str, value: str, problem: str) -> None:
        self.variable = variable
        self.value = value
        self.problem = problem
        super().__init__(
            f"{variable}={value!r} is not usable: {problem}. systemd sets it to a "
            f"positive decimal integer; without a valid interval the service cannot "
            f"keep the watchdog fed, so it refuses to start."
        )


def _socket_address(address: str) -> bytes:
    if address.startswith("@"):
        # Linux abstract namespace: systemd writes the leading NUL as '@'.
        return b"\0" + os.fsencode(address[1:])
    if address.startswith("/"):
        return os.fsencode(address)
    raise NotifySocketError(address=address, problem="unsupported address form")


class Notifier:
    """Sends notifications to the service manager, or does nothing without one.

    Send failures are logged, not raised: the service keeps working, and the
    consequence (systemd timing out the start, or the watchdog firing) is
    systemd's to decide. Every method returns whether a datagram went out.
    """

    def __init__(self, address: str | None, *, send_timeout: float = DEFAULT_SEND_TIMEOUT) -> None:
        self._address = _socket_address(address) if address else None
        self._send_timeout = send_timeout
        self._socket: socket.socket | None = None
        self._failing = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        """A notifier for ``NOTIFY_SOCKET`` in ``environ`` (default ``os.environ``)."""
        env = os.environ if environ is None else environ
        return cls(env.get("NOTIFY_SOCKET") or None)

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, *assignments: str) -> bool:
        """Send ``NAME=value`` assignments as one datagram."""
        for assignment in assignments:
            if "=" not in assignment or "\n" in assignment:
                raise ValueError(
                    f"a notification is one NAME=value line without newlines, got {assignment!r}"
                )
        if self._address is None:
            return False
        message = "\n".join(assignments).encode("utf-8")
        try:
            if self._socket is None:
                # Python sockets are created non-inheritable (PEP 446), so child
                # processes never get a copy of this descriptor.
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.settimeout(self._send_timeout)
                self._socket = sock
            self._socket.sendto(message, self._address)
        except OSError as error:
            # A watchdog ping every few seconds would repeat the same warning;
            # say it once, and again only after a send has worked.
            level = logging.DEBUG if self._failing else logging.WARNING
            logger.log(
                level,
                "could not send %r to the systemd notify socket: %s; continuing, "
                "systemd may time out the start or fire the watchdog",
                message.decode("utf-8"),
                error,
            )
            self._failing = True
            return False
        if self._failing:
            logger.info("systemd notify socket accepts messages again")
            self._failing = False
        return True

    def ready(self, status: str | None = None) -> bool:
        """The service is serving: ports are bound and state is loaded."""
        if status is None:
            return self.notify("READY=1")
        return self.notify("READY=1", _status(status))

    def status(self, text: str) -> bool:
        """A one-line, human-readable state shown by ``systemctl status``."""
        return self.notify(_status(text))

    def stopping(self, status: str | None = None) -> bool:
        """Shutdown has begun; systemd then stops counting it as a failure to respond."""
        if status is None:
            return self.notify("STOPPING=1")
        return self.notify("STOPPING=1", _status(status))

    def reloading(self, *, monotonic_usec: int | None = None) -> bool:
        """A configuration reload has begun; send ``ready()`` again when it is done.

        systemd pairs a reload with the CLOCK_MONOTONIC time in microseconds at
        which it began, so ``MONOTONIC_USEC`` is always sent with it. Tests pass
        ``monotonic_usec`` to get a predictable datagram.
        """
        usec = time.monotonic_ns() // 1000 if monotonic_usec is None else monotonic_usec
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def watchdog(self) -> bool:
        """The keep-alive for ``WatchdogSec=``."""
        return self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Notifier:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _status(text: str) -> str:
    # A newline would end the assignment and start a bogus one; a status line
    # that merely reads oddly is better than one that is dropped.
    return "STATUS=" + " ".join(text.splitlines())


def watchdog_interval(environ: Mapping[str, str] | None = None, *, pid: int | None = None) -> float | None:
    """Seconds between watchdog keep-alives, or None when no watchdog is set for us.

    systemd sets ``WATCHDOG_USEC`` to ``WatchdogSec=`` in microseconds. Pinging
    at half of it (sd_watchdog_enabled(3) recommends this) leaves a whole
    period of slack for a slow loop iteration. ``WATCHDOG_PID``, when set,
    names the process the watchdog is meant for; a different pid means the
    variables were inherited from a parent, and then there is no watchdog for
    this process. ``pid`` defaults to ``os.getpid()``.
    """
    env = os.environ if environ is None else environ
    usec_text = env.get("WATCHDOG_USEC", "")
    if not usec_text:
        return None
    pid_text = env.get("WATCHDOG_PID", "")
    if pid_text:
        try:
            watched_pid = int(pid_text)
        except ValueError:
            raise WatchdogEnvironmentError(
                variable="WATCHDOG_PID", value=pid_text, problem="not an integer"
            ) from None
        if watched_pid != (os.getpid() if pid is None else pid):
            return None
    try:
        usec = int(usec_text)
    except ValueError:
        raise WatchdogEnvironmentError(
            variable="WATCHDOG_USEC", value=usec_text, problem="not an integer"
        ) from None
    if usec <= 0:
        raise WatchdogEnvironmentError(variable="WATCHDOG_USEC", value=usec_text, problem="not positive")
    return usec / 2 / 1_000_000


async def watchdog_task(notifier: Notifier, *, period: float, healthy: Callable[[], bool]) -> None:
    """Send ``WATCHDOG=1`` every ``period`` seconds for as long as ``healthy()`` says so.

    A wedged event loop never gets here, so systemd restarts it. ``healthy``
    covers the other way to be dead: the loop turns but the work it exists for
    has stalled (say, the scheduling cycle stopped advancing). While it returns
    False, or raises, keep-alives are withheld and systemd restarts the service
    once ``WatchdogSec=`` passes without one. Runs until cancelled.
    """
    was_healthy = True
    while True:
        try:
            is_healthy = healthy()
        except Exception:
            logger.exception("watchdog health check raised; treating the service as unhealthy")
            is_healthy = False
        if is_healthy:
            if not was_healthy:
                logger.info("health check passes again; resuming watchdog keep-alives")
            notifier.watchdog()
        elif was_healthy:
            logger.warning(
                "health check fails; withholding watchdog keep-alives, so systemd "
                "restarts the service unless it recovers within WatchdogSec"
            )
        was_healthy = is_healthy
        await asyncio.sleep(period)
