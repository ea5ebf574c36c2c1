"""The SQLite store's WAL checkpoints: on a thread of its own, never inside a commit, the WAL bounded."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sluicegate.controller.store import Put
from sluicegate.controller.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[3]
# SQLite's own checkpoint never fires in these tests, so what keeps the WAL short is the store's thread.
NEVER = 1_000_000
BODY = b"x" * 900


def _put(i: int, tag: str = "") -> Put:
    return Put("Workload", "ns", f"wl-{i}", BODY + tag.encode())


def _wal_pages(path: Path) -> int:
    # The -wal file: a 32-byte header, then frames of a 24-byte header and a page; it never shrinks below
    # the most frames one WAL generation held (JOURNAL_SIZE_LIMIT is far above what these tests write).
    wal = Path(f"{path}-wal")
    return (wal.stat().st_size - 32) // (4096 + 24) if wal.exists() else 0


def test_checkpoints_run_on_the_store_thread_and_keep_the_wal_short(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from sluicegate.controller.store import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module._Checkpointer, "FOLLOW_SECONDS", 0.01)
    path = tmp_path / "store.db"
    store = SqliteStore(str(path), checkpoint_pages=50, backstop_pages=NEVER)
    try:
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == NEVER
        bursts, commits, rows = 60, 10, 5
        for b in range(bursts):
            for c in range(commits):
                store.write([_put((b * commits + c) * rows + r) for r in range(rows)])
            cp = store.checkpointer
            assert cp is not None
            # The writer pauses: the passes that follow copy the whole WAL until one finds nothing new (the
            # next commit starts it over).
            begun = cp.passes
            cp.wake()
            assert cp.wait_for(lambda cp=cp, begun=begun: cp.caught_up > begun, timeout=30)
        cp = store.checkpointer
        assert cp is not None and cp.failure is None
        assert cp.ran_on and threading.get_ident() not in cp.ran_on
        # 3,000 rows in 600 commits wrote far more than 1,000 frames; the WAL never held more than a few
        # bursts' worth (each burst is about 50 rows + 10 commits of frames).
        assert cp.most <= 400, cp.most
        assert _wal_pages(path) <= 400
    finally:
        store.close()
    # Everything was committed, and stays after a reopen.
    again = SqliteStore(str(path))
    try:
        assert len(again.load()) == 3_000
    finally:
        again.close()


def test_commits_do_not_wait_for_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sluicegate.controller.store import sqlite as sqlite_module

    held = threading.Event()
    release = threading.Event()
    real = sqlite_module._Checkpointer._pass

    def slow(self: sqlite_module._Checkpointer) -> tuple[int, int, int] | None:
        held.set()
        assert release.wait(30)
        return real(self)

    monkeypatch.setattr(sqlite_module._Checkpointer, "_pass", slow)
    path = tmp_path / "store.db"
    store = SqliteStore(str(path), checkpoint_pages=20, backstop_pages=NEVER)
    try:
        i = 0
        while not held.is_set() or i < 200:
            store.write([_put(i)])
            i += 1
            assert i < 100_000
        # The checkpoint is held: the writer went on committing (and wakes it again, to no effect).
        for j in range(i, i + 200):
            assert store.write([_put(j)]) == j + 1
        cp = store.checkpointer
        assert cp is not None and cp.passes == 0
        release.set()
        assert cp.wait_for(lambda: cp.caught_up > 0, timeout=30)
        assert threading.get_ident() not in cp.ran_on
    finally:
        release.set()
        store.close()
    assert cp is not None and not cp._thread.is_alive()


def test_close_ends_the_thread_and_a_store_without_wal_has_none(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(str(path), checkpoint_pages=10)
    for i in range(50):
        store.write([_put(i)])
    cp = store.checkpointer
    assert cp is not None
    store.close()
    assert not cp._thread.is_alive()
    # The last connection's close checkpointed and removed the WAL, as SQLite does.
    assert not Path(f"{path}-wal").exists()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM objects").fetchone()[0] == 50

    memory = SqliteStore(":memory:", checkpoint_pages=10)
    try:
        for i in range(50):
            memory.write([_put(i)])
        assert memory.checkpointer is None
    finally:
        memory.close()


_WRITER = """
import sys
from sluicegate.controller.store import Put
from sluicegate.controller.store.sqlite import SqliteStore
store = SqliteStore(sys.argv[1], checkpoint_pages=20)
i = 0
while True:
    store.write([Put("Workload", "ns", f"wl-{i}", b"y" * 900)])
    print(i, flush=True)  # acknowledged: committed
    i += 1
"""


def test_every_acknowledged_write_survives_a_kill_during_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env)
    acknowledged = -1
    try:
        assert child.stdout is not None
        for line in child.stdout:
            acknowledged = int(line)
            if acknowledged >= 3_000:  # some 150 wakes of the checkpointer
                break
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert acknowledged >= 3_000
    store = SqliteStore(str(path))
    try:
        names = {o.name for o in store.load()}
    finally:
        store.close()
    assert {f"wl-{i}" for i in range(acknowledged + 1)} <= names
