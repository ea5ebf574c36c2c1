"""The committer remembers the JSON of the objects it wrote, in two generations (see ENCODED_GENERATION).

The last ENCODED_GENERATION objects written are always remembered (a write's
replies and watch events reuse its bytes), never more than twice that many
are held, and a rewritten object is only ever answered with its newest JSON.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sluicegate.controller import commit
from sluicegate.controller.cache import Cache
from sluicegate.controller.commit import Committer
from sluicegate.controller.store.memory import MemoryStore
from tests.builders import workload


@pytest.fixture
def small_generations(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(commit, "ENCODED_GENERATION", 4)
    return 4


def test_the_last_generation_of_writes_is_always_remembered(
        small_generations: int, monkeypatch: pytest.MonkeyPatch) -> None:
    real = commit.encode_json
    made: list[Any] = []

    def counting(obj: Any) -> Any:
        made.append(obj)
        return real(obj)

    monkeypatch.setattr(commit, "encode_json", counting)
    c = Committer(MemoryStore(), Cache())
    wls = [workload(f"w-{i}") for i in range(11)]
    for i, wl in enumerate(wls):
        c.write([wl])
        assert len(c._encoded) + len(c._encoded_before) <= 2 * small_generations
        recent = wls[max(0, i + 1 - small_generations):i + 1]
        made.clear()
        bodies = [c.encoded(r).body for r in recent]
        assert made == []  # none encoded again: the bytes the write stored
        assert bodies == [real(r).body for r in recent]


def test_a_rewritten_object_is_answered_with_its_newest_json(small_generations: int) -> None:
    c = Committer(MemoryStore(), Cache())
    old = workload("w", priority=1)
    c.write([old])
    for i in range(small_generations - 1):
        c.write([workload(f"other-{i}")])  # w's first JSON is now in the previous generation
    new = replace(old, priority=2)
    c.write([new])
    assert c.encoded(new).body == commit.encode_json(new).body
    assert c.event("MODIFIED", new).encoded.body == commit.encode_json(new).body
    assert c.encoded(old).body == commit.encode_json(old).body  # an older instance: encoded again, not confused
