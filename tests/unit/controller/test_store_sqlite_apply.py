"""The SQLite store's ways of applying a transaction's writes all store what applying them one by one would.

A transaction's writes (a lone write, a group, or a group's writes kept from a
failed commit and redone before the next) are applied either upserted in write
order (puts only) or collapsed to each object's last change (puts and
deletes).  Whichever is taken, the rows must be each object's last put with
that put's version, and the version must go on from the newest write after a
reopen.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.store import Change, Delete, Put
from sluicegate.controller.store.sqlite import SqliteStore

NAMES = ("a", "b", "c", "d")

changes = st.one_of(
    st.builds(lambda n, b: Put("Workload", "default", n, b), st.sampled_from(NAMES), st.binary(max_size=8)),
    st.builds(lambda n: Delete("Workload", "default", n), st.sampled_from(NAMES)),
)
writes = st.lists(st.lists(changes, min_size=1, max_size=4), min_size=1, max_size=6)


def expected(batches: list[list[Change]], first_version: int) -> dict[str, tuple[bytes, int]]:
    """Each change applied alone, in order: the model every way of applying them must match."""
    rows: dict[str, tuple[bytes, int]] = {}
    for version, batch in enumerate(batches, start=first_version):
        for ch in batch:
            if isinstance(ch, Put):
                rows[ch.name] = (ch.body, version)
            else:
                rows.pop(ch.name, None)
    return rows


def stored(path: str) -> tuple[dict[str, tuple[bytes, int]], int]:
    store = SqliteStore(path)
    try:
        rows = {o.name: (o.body, o.resource_version) for o in store.load()}
        return rows, store.write([Put("Workload", "default", "probe", b"")]) - 1
    finally:
        store.close()


@settings(max_examples=60, deadline=None)
@given(before=writes, batches=writes, grouped=st.booleans(), lost=st.booleans())
def test_every_way_of_applying_writes_stores_each_objects_last_change(
        before: list[list[Change]], batches: list[list[Change]], grouped: bool, lost: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "s.db")
        store = SqliteStore(path)
        try:
            for b in before:
                store.write(b)
            if lost:
                # The group's commit fails: its writes are kept and redone first by the next write.
                real = store._db
                broken = sqlite3.connect(":memory:", isolation_level=None)  # no table: the commit fails
                store._db = broken
                with contextlib.suppress(Exception), store.group():
                    for b in batches:
                        store.write(b)
                store._db = real
                broken.close()
                assert store.pending == len(batches)
                store.write([Put("Workload", "default", "after", b"x")])
                assert store.pending == 0
            else:
                with store.group() if grouped else contextlib.nullcontext():
                    for b in batches:
                        store.write(b)
        finally:
            store.close()
        want = expected([*before, *batches], 1)
        newest = len(before) + len(batches)
        if lost:
            want["after"] = (b"x", newest + 1)
            newest += 1
        rows, version = stored(path)
        assert rows == want
        assert version == newest
