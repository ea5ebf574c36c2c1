"""Toleration matching and the NoExecute allowance, as Kubernetes computes them.

Cases of ``test_toleration_tolerates_taint`` are those of Kubernetes'
``staging/src/k8s.io/api/core/v1/toleration_test.go`` (TestTolerationToleratesTaint),
without the alpha Lt/Gt ones (not accepted here); the others follow
``component-helpers/scheduling/corev1/helpers.go`` (FindMatchingUntoleratedTaint)
and ``pkg/controller/tainteviction/taint_eviction.go`` (getMinTolerationTime).
"""

from __future__ import annotations

import pytest

from sluicegate.model.taints import (
    EQUAL,
    EXISTS,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    first_untolerated,
    no_execute_allowance,
    untolerated_count,
)

TOLERATES = [
    ("same key and effect, Exists, taint without value", Toleration("foo", EXISTS, effect=NO_SCHEDULE),
     Taint("foo", NO_SCHEDULE), True),
    ("same key and effect, Exists, taint with a value", Toleration("foo", EXISTS, effect=NO_SCHEDULE),
     Taint("foo", NO_SCHEDULE, "bar"), True),
    ("empty key with Exists matches every key", Toleration("", EXISTS, effect=NO_SCHEDULE),
     Taint("foo", NO_SCHEDULE, "bar"), True),
    ("same key, effect and value, Equal", Toleration("foo", EQUAL, "bar", NO_SCHEDULE),
     Taint("foo", NO_SCHEDULE, "bar"), True),
    ("same key and effect, other value, Equal", Toleration("foo", EQUAL, "value1", NO_SCHEDULE),
     Taint("foo", NO_SCHEDULE, "value2"), False),
    ("same key and value, other effect, Equal", Toleration("foo", EQUAL, "bar", NO_SCHEDULE),
     Taint("foo", NO_EXECUTE, "bar"), False),
    # Beyond the upstream table: an empty effect matches every effect, an empty operator means Equal.
    ("empty effect matches every effect", Toleration("foo", EQUAL, "bar"), Taint("foo", NO_EXECUTE, "bar"), True),
    ("empty operator means Equal", Toleration("foo", "", "bar", NO_SCHEDULE), Taint("foo", NO_SCHEDULE, "baz"), False),
    ("empty key, Exists, no effect: tolerates everything", Toleration("", EXISTS), Taint("x", NO_EXECUTE, "y"), True),
    ("other key", Toleration("foo", EXISTS), Taint("bar", NO_SCHEDULE), False),
]


@pytest.mark.parametrize(("toleration", "taint", "expected"), [c[1:] for c in TOLERATES], ids=[c[0] for c in TOLERATES])
def test_toleration_tolerates_taint(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration.tolerates(taint) is expected


def test_first_untolerated_skips_prefer_no_schedule_and_returns_the_first_in_order() -> None:
    taints = [Taint("soft", PREFER_NO_SCHEDULE), Taint("a", NO_SCHEDULE, "1"), Taint("b", NO_EXECUTE)]
    assert first_untolerated(taints, []) == Taint("a", NO_SCHEDULE, "1")
    assert first_untolerated(taints, [Toleration("a", EXISTS)]) == Taint("b", NO_EXECUTE)
    assert first_untolerated(taints, [Toleration("a", EXISTS), Toleration("b", EXISTS)]) is None
    assert untolerated_count(taints, [], PREFER_NO_SCHEDULE) == 1


NE = Taint("maint", NO_EXECUTE)
NE2 = Taint("drain", NO_EXECUTE, "yes")
ALLOWANCE = [
    ("no NoExecute taint: stays for ever", [Taint("x", NO_SCHEDULE)], [], None),
    ("untolerated NoExecute taint: evicted now", [NE], [], 0.0),
    ("tolerated without tolerationSeconds: for ever", [NE], [Toleration("maint", EXISTS, effect=NO_EXECUTE)], None),
    ("tolerated for 30s", [NE], [Toleration("maint", EXISTS, effect=NO_EXECUTE, toleration_seconds=30)], 30.0),
    ("zero or negative seconds mean now", [NE], [Toleration("maint", EXISTS, effect=NO_EXECUTE, toleration_seconds=-5)], 0.0),
    ("the shortest of the matched tolerations", [NE, NE2],
     [Toleration("maint", EXISTS, effect=NO_EXECUTE, toleration_seconds=60),
      Toleration("drain", EQUAL, "yes", NO_EXECUTE, toleration_seconds=20)], 20.0),
    ("one of two untolerated: now", [NE, NE2], [Toleration("maint", EXISTS, effect=NO_EXECUTE, toleration_seconds=60)], 0.0),
    ("each taint takes the first toleration that matches it", [NE],
     [Toleration("maint", EXISTS), Toleration("maint", EXISTS, effect=NO_EXECUTE, toleration_seconds=5)], None),
]


@pytest.mark.parametrize(("taints", "tolerations", "expected"), [c[1:] for c in ALLOWANCE], ids=[c[0] for c in ALLOWANCE])
def test_no_execute_allowance(taints, tolerations, expected) -> None:
    assert no_execute_allowance(taints, tolerations) == expected


def test_taint_text() -> None:
    assert str(Taint("dedicated", NO_SCHEDULE, "gpu")) == "dedicated=gpu:NoSchedule"
    assert str(Taint("maint", NO_EXECUTE)) == "maint:NoExecute"
    # Kueue prints the taint struct with Go's %s: key, value, effect, timeAdded.
    assert Taint("instance", NO_SCHEDULE, "spot").kueue_text() == "{instance spot NoSchedule <nil>}"
