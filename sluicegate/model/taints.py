"""Node taints and pod tolerations, with Kubernetes' matching rules.

A taint on a node repels pods that do not tolerate it.  The semantics are
Kubernetes' (``k8s.io/api/core/v1/toleration.go`` ``ToleratesTaint``,
``component-helpers/scheduling/corev1/helpers.go``
``FindMatchingUntoleratedTaint``, and the taint eviction controller's
``getMinTolerationTime``); the code is ours.

- ``NoSchedule``: nothing new that does not tolerate it is placed on the node.
- ``PreferNoSchedule``: placement avoids the node when another will do.
- ``NoExecute``: as NoSchedule, and pods already there that do not tolerate
  it are evicted; a toleration with ``tolerationSeconds`` lets a pod stay
  that long.

The comparison operators ``Lt``/``Gt`` (alpha in Kubernetes, behind a gate
that is off by default) are not accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

EQUAL = "Equal"
EXISTS = "Exists"
TOLERATION_OPERATORS = (EQUAL, EXISTS)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        """kubectl's form: ``key=value:Effect`` (``key:Effect`` without a value)."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    def kueue_text(self) -> str:
        """How Kueue's messages print a taint: Go's ``%s`` of the struct, whose timeAdded is nil."""
        return f"{{{self.key} {self.value} {self.effect} <nil>}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    # Empty: every key (the operator must then be Exists).
    key: str = ""
    # Equal (also when empty) or Exists.
    operator: str = EQUAL
    value: str = ""
    # Empty: every effect.
    effect: str = ""
    # NoExecute only: how long a pod stays on a node that gains the taint; None: for ever.
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == EXISTS:
            return True
        if self.operator in ("", EQUAL):
            return self.value == taint.value
        return False


def blocks_scheduling(taint: Taint) -> bool:
    """The effects that keep a pod off a node (Kueue's flavor filter and the scheduler's Filter)."""
    return taint.effect in (NO_SCHEDULE, NO_EXECUTE)


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def first_untolerated(
    taints: Sequence[Taint],
    tolerations: Sequence[Toleration],
    include: Callable[[Taint], bool] = blocks_scheduling,
) -> Taint | None:
    """The first taint that ``include`` selects and no toleration tolerates; None when all are."""
    for taint in taints:
        if include(taint) and not tolerated(taint, tolerations):
            return taint
    return None


def untolerated_count(taints: Sequence[Taint], tolerations: Sequence[Toleration], effect: str) -> int:
    """How many taints of ``effect`` are not tolerated (the scheduler's PreferNoSchedule score counts them)."""
    return sum(1 for t in taints if t.effect == effect and not tolerated(t, tolerations))


def no_execute_allowance(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> float | None:
    """How long a pod may stay on a node with these taints: 0 at once, None for ever.

    Only NoExecute taints count.  Each is matched by the first toleration
    that tolerates it; an untolerated one means eviction now.  The pod stays
    for the shortest ``tolerationSeconds`` among the matched tolerations (one
    of zero or less means now); none set means for ever.
    """
    matched: list[Toleration] = []
    for taint in taints:
        if taint.effect != NO_EXECUTE:
            continue
        tol = next((t for t in tolerations if t.tolerates(taint)), None)
        if tol is None:
            return 0.0
        matched.append(tol)
    limits = [t.toleration_seconds for t in matched if t.toleration_seconds is not None]
    if not limits:
        return None
    return float(max(0, min(limits)))
