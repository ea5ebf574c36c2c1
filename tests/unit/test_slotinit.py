"""slot_init's ``__init__`` makes, for every class it is applied to, the value dataclasses' own makes."""

from __future__ import annotations

import dataclasses
import inspect
import random

import pytest

from sluicegate.controller import effects, nodes
from sluicegate.controller.lifecycle import Settlement
from sluicegate.model.pods import PodRecord
from sluicegate.model.slotinit import slot_init
from sluicegate.model.workloads import Admission, Condition, PodSetAssignment, RequeueState, Workload, WorkloadStatus

CLASSES = [Condition, PodSetAssignment, Admission, RequeueState, WorkloadStatus, Workload, PodRecord, Settlement]
# The effects of decisions and the agents' commands, made once or more per write.
CLASSES += [c for m in (effects, nodes) for c in vars(m).values()
            if isinstance(c, type) and c.__module__ == m.__name__ and "__dataclass_init__" in vars(c)]
# Values any field accepts for this comparison (the model does not check types at construction).
VALUES: list[object] = ["", "x", 0, 7, 1.5, None, True, (), ("a", "b"), {"cpu": 500}]


def _made_by_dataclasses(cls: type, args: list[object], kwargs: dict[str, object]) -> object:
    obj = object.__new__(cls)
    cls.__dataclass_init__(obj, *args, **kwargs)  # type: ignore[attr-defined]
    return obj


def _state(obj: object) -> dict[str, object]:
    # Every slot, those the comparison leaves out (a workload's key) too.
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_same_signature_and_the_same_values_for_any_arguments(cls: type) -> None:
    assert str(inspect.signature(cls.__init__)) == str(inspect.signature(cls.__dataclass_init__))  # type: ignore[attr-defined]
    rng = random.Random(cls.__name__)
    params = [f for f in dataclasses.fields(cls) if f.init]
    required = [f for f in params if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    for _ in range(200):
        args = [rng.choice(VALUES) for _ in required]
        if cls is Workload:
            args[:2] = [rng.choice(["a", "b"]), rng.choice(["ns", "default"])]  # a key is made from these
        optional = [f for f in params if f not in required]
        kwargs = {f.name: rng.choice(VALUES) for f in rng.sample(optional, rng.randrange(len(optional) + 1))}
        made, expected = cls(*args, **kwargs), _made_by_dataclasses(cls, args, kwargs)
        assert made == expected and _state(made) == _state(expected)
    # Default factories give each value its own.
    if required:
        args = ["a", "ns", *[0] * (len(required) - 2)] if cls is Workload else [0] * len(required)
        a, b = cls(*args), cls(*args)
        for f in params:
            if f.default_factory is not dataclasses.MISSING:
                assert getattr(a, f.name) == getattr(b, f.name) and getattr(a, f.name) is not getattr(b, f.name)


def test_missing_and_unknown_arguments_are_refused_as_before() -> None:
    with pytest.raises(TypeError, match="missing"):
        Condition("Admitted", "True")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword"):
        Condition("Admitted", "True", "r", "m", 1.0, colour="red")  # type: ignore[call-arg]


def test_only_slotted_dataclasses_without_pseudo_fields_are_taken() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    with pytest.raises(TypeError, match="not a slot"):
        slot_init(NoSlots)
