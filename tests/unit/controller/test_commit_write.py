"""What Committer.write hands the store: one Put per object (the bytes it encoded) and one Delete per ref."""

from __future__ import annotations

from collections.abc import Sequence

from sluicegate.controller.cache import Cache
from sluicegate.controller.commit import Committer
from sluicegate.controller.objects import ref_of
from sluicegate.controller.store import Change, Delete, Put
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.encode import encode_json
from tests.builders import resource_flavor, workload


class Recording(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[Sequence[Change]] = []

    def write(self, changes: Sequence[Change]) -> int:
        self.writes.append(list(changes))
        return super().write(changes)


def test_a_write_hands_the_store_a_put_per_object_and_a_delete_per_ref() -> None:
    store = Recording()
    c = Committer(store, Cache())
    wl, rf = workload("w"), resource_flavor("rf")
    gone = ("Workload", "default", "old")
    version = c.write([wl, rf], [gone])
    (changes,) = store.writes
    assert [type(ch) for ch in changes] == [Put, Put, Delete]  # exactly these types: the stores test them so
    assert changes == [Put("Workload", wl.namespace, wl.name, encode_json(wl).body),
                       Put(*ref_of(rf), encode_json(rf).body), Delete(*gone)]
    assert changes[0].body is c.encoded(wl).body  # the bytes stored are the ones replies and events reuse
    assert c.versions[ref_of(wl)] == c.versions[ref_of(rf)] == version
