"""The controller's garbage-collection policy: survivors of a full collection or of a burst are frozen, rescans reclaim frozen cycles."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Iterator

import pytest

from sluicegate.common import heapgc
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


def test_after_burst_freezes_what_is_alive_only_while_installed(policy: HeapGc) -> None:
    kept = [Node() for _ in range(100)]
    before = gc.get_freeze_count()
    policy.after_burst()
    assert gc.get_freeze_count() >= before + len(kept)
    # Garbage made after the freeze is collected as usual.
    ref = cycle()[0]
    gc.collect()
    assert ref() is None
    policy.uninstall()
    policy.after_burst()
    assert gc.get_freeze_count() == 0


def test_a_cycle_frozen_by_after_burst_waits_for_a_rescan(policy: HeapGc) -> None:
    ref, holder = cycle()
    policy.after_burst()
    del holder
    gc.collect()
    assert ref() is not None
    assert policy.rescan() >= 2
    assert ref() is None and policy.rescans_total == 1


def test_growth_of_the_frozen_heap_brings_a_rescan_forward(policy: HeapGc, monkeypatch: pytest.MonkeyPatch) -> None:
    policy.rescan()
    assert not policy.grown()
    monkeypatch.setattr(heapgc, "RESCAN_GROWTH", 1000)
    # More than the heap held after the rescan: a leak of that size would double it.
    grown = [Node() for _ in range(policy.frozen_at_rescan + 1000)]
    policy.after_burst()
    assert policy.grown()
    ref, holder = cycle()
    policy.after_burst()
    del holder

    async def main() -> None:
        task = asyncio.create_task(policy.rescans(interval=3600.0, check=0.001))
        try:
            await asyncio.wait_for(until(lambda: policy.rescans_total == 2), timeout=10)
        finally:
            task.cancel()

    async def until(done: Callable[[], bool]) -> None:
        for _ in range(10_000):
            if done():
                return
            await asyncio.sleep(0.001)
        raise AssertionError("no rescan")

    asyncio.run(main())
    assert ref() is None and not policy.grown()
    del grown
