"""NoExecute evictions, as Kubernetes' taint eviction controller decides them.

Upstream: ``pkg/controller/tainteviction/taint_eviction.go`` (processPodOnNode:
no NoExecute taint cancels; an untolerated one deletes at once; otherwise the
deletion is scheduled after getMinTolerationTime, counted from when it was
first scheduled, and a toleration without seconds keeps the pod for ever).
"""

from __future__ import annotations

from sluicegate.controller.decide_taints import PodTolerations, TaintEviction, taint_evictions
from sluicegate.model.taints import EXISTS, NO_EXECUTE, NO_SCHEDULE, Taint, Toleration

MAINT = Taint("maint", NO_EXECUTE)
PLAIN = PodTolerations("u1", "w-main-0", ())
FOREVER = PodTolerations("u2", "v-main-0", (Toleration("maint", EXISTS),))
BRIEF = PodTolerations("u3", "x-main-0", (Toleration("maint", EXISTS, effect=NO_EXECUTE, toleration_seconds=30),))


def decide(taints, scheduled=None, now=100.0):
    return taint_evictions(node="n1", taints=taints, pods=[PLAIN, FOREVER, BRIEF], scheduled=scheduled or {}, now=now)


def test_no_no_execute_taint_evicts_nothing() -> None:
    assert decide([Taint("x", NO_SCHEDULE)]) == {}


def test_untolerated_now_tolerated_later_tolerated_for_ever_never() -> None:
    got = decide([MAINT])
    assert got == {
        "u1": TaintEviction("u1", 100.0, 100.0, "Taint manager: deleting due to NoExecute taint: "
                            "pod w-main-0 does not tolerate taint maint:NoExecute of node n1"),
        "u3": TaintEviction("u3", 100.0, 130.0, "Taint manager: deleting due to NoExecute taint: "
                            "pod x-main-0 tolerates taint(s) maint:NoExecute of node n1 for only 30s"),
    }


def test_a_scheduled_eviction_keeps_its_start() -> None:
    first = decide([MAINT], now=100.0)
    later = decide([MAINT], scheduled={"u3": first["u3"]}, now=120.0)
    assert later["u3"].due == 130.0


def test_taint_removed_cancels() -> None:
    first = decide([MAINT])
    assert decide([], scheduled=first, now=110.0) == {}
