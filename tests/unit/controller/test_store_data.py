"""Moving and protecting the data: ``sluicegate-controller migrate`` between any two backends, and
``backup`` + restore round-tripping every object (bytes and versions), also while writes go on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluicegate.controller.datacmd import backup, migrate
from sluicegate.controller.server import main
from sluicegate.controller.store import Delete, Put, Snapshot, StoredObject
from sluicegate.controller.store.sqlite import SqliteStore
from tests.conftest import StoreFactory
from tests.pg import wait_until

BACKENDS = ["sqlite", "postgresql"]


def fill(store: Any) -> list[StoredObject]:
    """A little of everything: kinds, namespaces, bytes JSON never has, updates, deletes, meta."""
    store.write([Put("ResourceFlavor", "", "default", b'{"kind":"ResourceFlavor"}')])
    store.write([Put("ClusterQueue", "", "cq", b'{"kind":"ClusterQueue"}'), Put("LocalQueue", "team-a", "lq", b"{}")])
    with store.group():
        for i in range(40):
            store.write([Put("Workload", f"team-{i % 3}", f"w{i}", b'{"i":%d}' % i + bytes(range(256)))])
    store.write([Put("Workload", "team-0", "w0", b'{"updated":true}')])
    store.write([Delete("Workload", "team-1", "w1"), Delete("LocalQueue", "team-a", "lq")])
    store.set_meta("pki-state", '{"serial": 7}')
    objects: list[StoredObject] = store.load()
    return objects


@pytest.mark.parametrize("source_backend", BACKENDS)
@pytest.mark.parametrize("destination_backend", BACKENDS)
def test_migrate_copies_every_object_and_meta_entry_between_any_two_backends(
    make_store_factory: Callable[[str], StoreFactory], source_backend: str, destination_backend: str
) -> None:
    source, destination = make_store_factory(source_backend), make_store_factory(destination_backend)
    objects = fill(source())
    lines: list[str] = []
    assert migrate(source.url, destination.url, out=lines.append)

    copied = destination()
    assert copied.load() == objects
    assert copied.get_meta("pki-state") == '{"serial": 7}'
    # The copy goes on from the source's version (the last write was a delete: on no row).
    assert copied.write([Put("Workload", "team-0", "next", b"{}")]) == 45
    assert "Workload                         39         39" in lines
    assert lines[-1].endswith(": verified") and "copied 41 objects and 1 meta entries at resource version 44" in lines[-1]


def test_migrate_refuses_a_destination_that_holds_anything_unless_forced(
    make_store_factory: Callable[[str], StoreFactory], capsys: pytest.CaptureFixture[str]
) -> None:
    source, destination = make_store_factory("sqlite"), make_store_factory("postgresql")
    fill(source())
    destination().write([Put("Workload", "other", "theirs", b"{}")])
    assert main(["migrate", "--from", f"sqlite:{source.url}", "--to", destination.url]) == 2
    err = capsys.readouterr().err
    assert "is not empty (1 Workload); --force replaces its content" in err
    assert [o.name for o in destination().load()] == ["theirs"]

    assert main(["migrate", "--from", f"sqlite:{source.url}", "--to", destination.url, "--force"]) == 0
    assert "theirs" not in [o.name for o in destination().load()]
    assert "verified" in capsys.readouterr().out


def test_migrate_from_a_file_that_does_not_exist_touches_nothing(
    make_store_factory: Callable[[str], StoreFactory], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    destination = make_store_factory("sqlite")
    destination().write([Put("Workload", "ns", "kept", b"{}")])
    assert main(["migrate", "--from", str(tmp_path / "typo.db"), "--to", destination.url, "--force"]) == 2
    assert "typo.db: no such file" in capsys.readouterr().err
    assert not (tmp_path / "typo.db").exists() and destination.stored() == {"kept": 1}


def test_a_copy_that_does_not_verify_exits_non_zero(
    make_store_factory: Callable[[str], StoreFactory], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source, destination = make_store_factory("postgresql"), make_store_factory("sqlite")
    fill(source())
    real = SqliteStore.replace_all

    def loses_one(self: SqliteStore, snapshot: Snapshot) -> None:  # a destination that drops a row
        real(self, Snapshot(snapshot.objects[1:], snapshot.meta, snapshot.version))

    monkeypatch.setattr(SqliteStore, "replace_all", loses_one)
    assert main(["migrate", "--from", source.url, "--to", destination.url]) == 1
    out = capsys.readouterr().out
    assert "ResourceFlavor                    1          0   MISMATCH" in out and "VERIFICATION FAILED" in out


@pytest.mark.parametrize("backend", BACKENDS)
def test_backup_and_restore_round_trip_every_object(
    make_store_factory: Callable[[str], StoreFactory], tmp_path: Path, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    live = make_store_factory(backend)
    objects = fill(live())
    out = tmp_path / "backup.db"
    assert main(["backup", "--store", live.url, "--out", str(out)]) == 0
    assert f"backed up 41 objects at resource version 44 from {live.url} to {out}" in capsys.readouterr().out
    assert out.stat().st_mode & 0o077 == 0  # the backup holds every tenant's objects
    assert main(["backup", "--store", live.url, "--out", str(out)]) == 2  # never overwritten by accident
    assert "--force replaces it" in capsys.readouterr().err

    # The cluster is lost; restore into a new, empty store of the same backend.
    restored = make_store_factory(backend)
    assert main(["migrate", "--from", str(out), "--to", restored.url]) == 0
    store = restored()
    assert store.load() == objects
    assert store.get_meta("pki-state") == '{"serial": 7}'
    assert store.write([Put("Workload", "team-0", "next", b"{}")]) == 45


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backup_taken_while_writes_go_on_is_one_consistent_moment(
    make_store_factory: Callable[[str], StoreFactory], tmp_path: Path, backend: str
) -> None:
    live = make_store_factory(backend)
    writer_store = live()
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        # Version i adds object w<i> and sets "counter" to i, in one write.
        for i in range(1, 20_001):
            if stop.is_set():
                return
            version = writer_store.write([Put("Workload", "ns", f"w{i}", b"%d" % i), Put("Workload", "ns", "counter", b"%d" % i)])
            assert version == i
            written.append(i)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: len(written) >= 50, timeout=30, what="the writer to get going")
        taken = backup(live.url, str(tmp_path / "backup.db"), out=lambda _: None)
        during = len(written)
        wait_until(lambda: len(written) >= during + 20, timeout=30, what="writes after the backup")
    finally:
        stop.set()
        writer.join(30)
    assert not writer.is_alive()

    v = taken.version
    assert 50 <= v < len(written)  # taken while writes went on, before the last of them
    by_name = {o.name: o for o in taken.objects}
    assert by_name.pop("counter").body == b"%d" % v
    assert sorted(by_name) == sorted(f"w{i}" for i in range(1, v + 1))
    assert all(o.resource_version == int(o.name[1:]) for o in by_name.values())

    restored = make_store_factory(backend)
    assert migrate(str(tmp_path / "backup.db"), restored.url, out=lambda _: None)
    assert restored().load() == sorted(taken.objects, key=lambda o: o.resource_version)
