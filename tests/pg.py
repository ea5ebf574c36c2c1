"""A private PostgreSQL server for one test session (or one benchmark run).

Debian's ``postgresql`` package (``scripts/test`` installs it when missing)
provides the binaries; this module initdb's a cluster into a temporary
directory, starts it on a free loopback port with its socket in that
directory, and hands out fresh databases.  initdb refuses to run as root, so
as root the cluster belongs to the unprivileged ``postgres`` user (the data
directory, socket directory and log are that user's) and every server
command runs through ``runuser -u postgres --``.  Authentication is
``trust``: the server listens on 127.0.0.1 only and lives for one session.

No mock stands in for the database: a test that needs PostgreSQL gets this
real server, and fails (never skips) when it cannot start.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Seconds any one server command (initdb, start, stop) may take.
COMMAND_TIMEOUT = 60.0
# The longest a test session may keep its server (the watchdog's bound).
SESSION_LIMIT = 6 * 3600.0

# Stops the server and removes its files when the process that started it is
# gone, however it ended (SIGKILL included): a session never leaves a server
# behind.  It waits on a pidfd, so it costs nothing while the session runs.
_WATCHDOG = """
import os, select, shutil, subprocess, sys
parent, limit, base = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
select.select([os.pidfd_open(parent)], [], [], limit)
subprocess.run(sys.argv[4:], timeout=60, capture_output=True, check=False)
shutil.rmtree(base, ignore_errors=True)
"""


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here, or the private server would not start: the message says what to do."""


def bindir() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` that has initdb."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found:
        raise PostgresUnavailable(
            "no /usr/lib/postgresql/*/bin/initdb: install Debian's postgresql package "
            "(apt-get install postgresql; ./scripts/test does it when run as root)"
        )
    return found[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One initdb'd cluster, started on 127.0.0.1:``port`` with its socket under ``base``."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.bin = bindir()
        self._as_postgres = os.geteuid() == 0
        self.base = Path(tempfile.mkdtemp(prefix="sluicegate-pg-"))
        self.data = self.base / "data"
        self.sockets = self.base / "sockets"
        self.log = self.base / "server.log"
        self.port = 0
        self.fsync = fsync
        self._names = itertools.count(1)
        self.running = False
        self.sockets.mkdir()
        self.log.touch()
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            for p in (self.base, self.sockets, self.log):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        atexit.register(self.close)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(SESSION_LIMIT), str(self.base),
             *self._command("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8",
                      "--no-sync")
            self.start()
        except BaseException:
            self.close()
            raise

    def _command(self, tool: str, *args: str) -> list[str]:
        cmd = [str(self.bin / tool), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if self._as_postgres else cmd

    def _run(self, tool: str, *args: str) -> None:
        cmd = self._command(tool, *args)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, cwd=self.base, check=False)
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"{tool} {' '.join(args)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}; "
                f"server log: {self.log}"
            )

    def start(self) -> None:
        """Start the server (on a new free port the first time, the same port after that)."""
        if not self.port:
            self.port = free_port()
        options = f"-k {self.sockets} -h 127.0.0.1 -p {self.port} -c max_connections=200"
        if not self.fsync:
            # Tests only: a crashed test server is thrown away anyway.  The benchmark keeps fsync on.
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(int(COMMAND_TIMEOUT)),
                  "-o", options, "start")
        self.running = True

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server if it runs; ``immediate`` (the default) is a crash, ``fast`` a clean shutdown."""
        if self.running:
            self.running = False
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
            except (PostgresUnavailable, subprocess.TimeoutExpired):
                pass

    def restart(self) -> None:
        self.stop("fast")
        self.start()

    def close(self) -> None:
        """Stop the server and remove its files."""
        self.stop()
        atexit.unregister(self.close)
        if self._watchdog.poll() is None:
            self._watchdog.kill()
            self._watchdog.wait(COMMAND_TIMEOUT)
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def socket_url(self, dbname: str = "postgres") -> str:
        """The same database over the Unix socket (libpq's host= is a directory)."""
        return f"postgresql://postgres@/{dbname}?host={self.sockets}&port={self.port}"

    def version(self) -> str:
        """The server's version, as ``SHOW server_version`` says it."""
        ((version,),) = self.execute(self.url(), "SHOW server_version")
        return str(version)

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            # FILE_COPY (PostgreSQL 15+) copies the tiny template in a few ms, where WAL_LOG logs every page.
            strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0{strategy}'.encode())
        return self.url(name)

    def execute(self, url: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Run one statement on its own connection (autocommit) and return its rows, if any."""
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql.encode(), params)
            return cur.fetchall() if cur.description else []


def wait_until(predicate: object, *, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate()`` until it is true, at most ``timeout`` seconds."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    for _ in range(100_000):
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")
