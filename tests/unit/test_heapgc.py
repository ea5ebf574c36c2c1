"""The controller's garbage-collection policy: survivors of a full collection are frozen, rescans reclaim frozen cycles."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sluicegate.common.heapgc import YOUNG_THRESHOLD, HeapGc


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def policy() -> Iterator[HeapGc]:
    before = gc.get_threshold()
    p = HeapGc()
    p.install()
    try:
        yield p
    finally:
        p.uninstall()
        assert gc.get_threshold() == before


def cycle() -> tuple[weakref.ref[Node], Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a), a


def test_survivors_of_a_full_collection_are_frozen_and_counted(policy: HeapGc) -> None:
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    kept = [Node() for _ in range(100)]
    gc.collect()
    assert (policy.full_collections, gc.get_freeze_count() >= len(kept)) == (1, True)
    assert policy.full_seconds > 0
    # Garbage made after the freeze is still collected by the next full collection.
    ref = cycle()[0]
    gc.collect()
    assert ref() is None


def test_a_rescan_frees_a_cycle_that_died_while_frozen(policy: HeapGc) -> None:
    ref, holder = cycle()
    gc.collect()  # the cycle is alive: frozen with the other survivors
    del holder
    gc.collect()  # frozen objects are not looked at
    assert ref() is not None
    policy.rescan()
    assert ref() is None
    assert gc.get_freeze_count() > 0  # the survivors are frozen again


def test_uninstall_restores_the_collector() -> None:
    before = gc.get_threshold()
    p = HeapGc()
    p.install()
    p.install()  # once only
    gc.collect()
    p.uninstall()
    assert (gc.get_threshold(), gc.get_freeze_count(), p._callback in gc.callbacks) == (before, 0, False)
