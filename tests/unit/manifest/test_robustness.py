"""Whatever a document holds, decoding either succeeds or raises ManifestError.

Each valid sample has random nodes replaced by values of the wrong shape;
the decoder must report them, never crash with a TypeError or KeyError.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest

from sluicegate.manifest import ManifestError, decode

from . import samples

_ODD_VALUES: list[Any] = [None, 0, -1, 2**40, 1.5, True, "", "x", "-1", [], [1, "a"], {}, {"k": "v"}, {1: 2}, [[{}]]]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    value = copy.deepcopy(value)  # shared values would let a document contain itself
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


BASES: list[Callable[[], dict[str, Any]]] = [
    samples.resource_flavor,
    samples.cluster_queue,
    samples.cohort,
    samples.local_queue,
    samples.workload_priority_class,
    samples.priority_class,
    samples.namespace,
    samples.workload_with_status,
    samples.configuration,
]


@pytest.mark.parametrize("base", BASES, ids=lambda f: f.__name__)
def test_any_single_replacement_is_reported_not_crashed(base: Callable[[], dict[str, Any]]) -> None:
    for path in _paths(base()):
        for value in _ODD_VALUES:
            doc = _replace(base(), path, value)
            try:
                decode(doc)
            except ManifestError as exc:
                assert exc.errors, path


@pytest.mark.parametrize("seed", range(20), ids=lambda s: f"seed-{s}")
def test_several_random_replacements_are_reported_not_crashed(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        base = rng.choice(BASES)
        doc = base()
        for _ in range(rng.randrange(1, 5)):
            paths = _paths(doc)
            doc = _replace(doc, rng.choice(paths[1:]), rng.choice(_ODD_VALUES))
        try:
            decode(doc)
        except ManifestError as exc:
            assert exc.errors
