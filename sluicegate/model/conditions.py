"""Setting conditions the Kubernetes way: lastTransitionTime moves only on a status change."""

from __future__ import annotations

import sys

from sluicegate.model.workloads import Condition


def set_condition(
    conditions: tuple[Condition, ...],
    *,
    type_: str,
    status: bool | str,
    reason: str,
    message: str,
    now: float,
) -> tuple[Condition, ...]:
    st = ("True" if status else "False") if isinstance(status, bool) else status
    # Tens of thousands of workloads carry a few distinct messages ("... in
    # ClusterQueue X", "Job finished successfully"): one string for all of them.
    reason, message = sys.intern(reason), sys.intern(message)
    out: list[Condition] = []
    replaced = False
    for c in conditions:
        if c.type == type_:
            when = c.last_transition_time if c.status == st else now
            out.append(Condition(type_, st, reason, message, when))
            replaced = True
        else:
            out.append(c)
    if not replaced:
        out.append(Condition(type_, st, reason, message, now))
    return tuple(out)


def remove_condition(conditions: tuple[Condition, ...], type_: str) -> tuple[Condition, ...]:
    return tuple(c for c in conditions if c.type != type_)
