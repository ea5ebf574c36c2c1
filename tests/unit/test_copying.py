"""copy_with is dataclasses.replace for the controller's frozen values, only cheaper."""

from __future__ import annotations

import dataclasses

import pytest

from sluicegate.controller.lifecycle import Settlement
from sluicegate.model.conditions import Condition
from sluicegate.model.copying import copier, copy_with
from sluicegate.model.pods import PodRecord
from sluicegate.model.workloads import Workload, WorkloadStatus
from tests.builders import workload


def _pod(uid: str) -> PodRecord:
    return PodRecord(uid=uid, name=f"p-{uid}", pod_set="main", index=0, node="n1", requests={"cpu": 500})


def test_the_copy_equals_replaces_for_every_field_changed_alone_and_all_at_once() -> None:
    wl = workload("a")
    status = dataclasses.replace(wl.status, pods=(_pod("1"),))
    values: list[object] = [wl, status, _pod("2"), Settlement(wl),
                            Condition(type="Admitted", status="True", reason="Admitted", message="m",
                                      last_transition_time=1.0)]
    for value in values:
        for f in dataclasses.fields(value):  # type: ignore[arg-type]
            if not f.init:
                continue
            new = getattr(value, f.name)
            assert copy_with(value, **{f.name: new}) == dataclasses.replace(value, **{f.name: new})  # type: ignore[type-var]
        assert copy_with(value) == value and copy_with(value) is not value


def test_a_workload_renamed_by_a_copy_gets_its_key_again() -> None:
    wl = workload("a")
    renamed = copy_with(wl, name="b", status=WorkloadStatus())
    assert renamed.key == dataclasses.replace(wl, name="b").key == "default/b"
    assert isinstance(renamed, Workload) and renamed.status == WorkloadStatus()


def test_an_unknown_or_derived_field_is_refused() -> None:
    with pytest.raises(TypeError):
        copy_with(workload("a"), nmae="b")
    with pytest.raises(TypeError):
        copy_with(workload("a"), key="x")  # derived from namespace and name


def test_a_copier_of_fixed_fields_is_replace_and_keeps_the_derived_key() -> None:
    from sluicegate.model.copying import copier

    wl = workload("a")
    with_status = copier(Workload, ("status",))
    status = dataclasses.replace(wl.status, pods=(_pod("1"),))
    assert with_status(wl, status) == dataclasses.replace(wl, status=status)
    assert with_status(wl, status).key == wl.key


def test_a_copy_of_a_slotted_class_sets_each_slot_through_its_descriptor() -> None:
    # The copier writes slots with their descriptors, and anything else (a class without __slots__)
    # through object.__setattr__: both make the value replace() makes.
    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int
        b: str = "x"

    p = Plain(1)
    assert copy_with(p, b="y") == dataclasses.replace(p, b="y")
    w = workload("w", requests={"cpu": 1})
    assert copier(Workload, ("status",))(w, w.status) == w
