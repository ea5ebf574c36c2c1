"""Taints and tolerations in manifests and settings, validated as Kubernetes validates them.

The rules are those of Kubernetes' ``pkg/apis/core/validation``
(``validateNodeTaints``, ``ValidateTolerations``): a taint needs a key
(a qualified name) and an effect, its value is a label value, and a node's
taints are unique by key and effect; a toleration's key may be empty only
with ``Exists``, ``Exists`` takes no value, ``tolerationSeconds`` goes
only with ``NoExecute``.
"""

from __future__ import annotations

from sluicegate.manifest.reader import INT64_MAX, Fields, Problems
from sluicegate.manifest.syntax import label_value_problem, qualified_name_problem, show
from sluicegate.model.taints import EQUAL, EXISTS, NO_EXECUTE, TAINT_EFFECTS, TOLERATION_OPERATORS, Taint, Toleration

TAINT_FIELDS = ("key", "value", "effect")
TAINT_UNSUPPORTED = {"timeAdded": "set by Kubernetes' node lifecycle controller, never by a user"}
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
_EFFECTS = {e: e for e in TAINT_EFFECTS}
_OPERATORS = {o: o for o in TOLERATION_OPERATORS}


def read_taints(fields: Fields, key: str, *, max_items: int | None = None) -> tuple[Taint, ...]:
    out: list[Taint] = []
    seen: set[tuple[str, str]] = set()
    for path, raw in fields.items(key, max_items=max_items):
        f = Fields.of(raw, path, fields.problems, known=TAINT_FIELDS, unsupported=TAINT_UNSUPPORTED)
        if f is None:
            continue
        taint = Taint(
            key=f.string("key", required=True, check=qualified_name_problem),
            value=f.string("value", check=label_value_problem),
            effect=f.choice("effect", _EFFECTS, default="", required=True),
        )
        if taint.key and taint.effect:
            if (taint.key, taint.effect) in seen:
                fields.problems.add(path, f"taints must be unique by key and effect pair: {taint} is listed twice")
            seen.add((taint.key, taint.effect))
        out.append(taint)
    return tuple(out)


def read_tolerations(fields: Fields, key: str, *, max_items: int | None = None) -> tuple[Toleration, ...]:
    out: list[Toleration] = []
    for path, raw in fields.items(key, max_items=max_items):
        f = Fields.of(raw, path, fields.problems, known=TOLERATION_FIELDS)
        if f is None:
            continue
        tol_key = f.string("key", check=qualified_name_problem)
        # Empty is allowed for both: Equal, and every effect.  Lt/Gt are alpha in Kubernetes (gate off by default).
        operator = EQUAL if f.get("operator") == "" else f.choice("operator", _OPERATORS, default=EQUAL)
        value = f.string("value")
        effect = "" if f.get("effect") == "" else f.choice("effect", _EFFECTS, default="")
        seconds = f.integer("tolerationSeconds", minimum=-INT64_MAX - 1, maximum=INT64_MAX)
        if not tol_key and operator != EXISTS:
            f.error("operator", 'must be Exists when key is empty, which means "match all values and all keys"')
        if seconds is not None and effect != NO_EXECUTE:
            f.error("effect", f"must be NoExecute when tolerationSeconds is set, got {show(effect)}")
        if operator == EXISTS and value:
            f.error("value", f"must be empty when operator is Exists, got {show(value)}")
        elif operator == EQUAL and (problem := label_value_problem(value)) is not None:
            f.error("value", problem)
        out.append(Toleration(key=tol_key, operator=operator, value=value, effect=effect,
                              toleration_seconds=seconds))
    return tuple(out)


def taint_fields(text: str) -> dict[str, str]:
    """kubectl's and the kubelet's ``--register-with-taints`` form ``key[=value]:Effect`` as a taint's fields."""
    body, _, effect = text.rpartition(":")
    key, _, value = body.partition("=")
    return {"key": key, "value": value, "effect": effect}


def read_taint_list(raw: object, *, where: str) -> tuple[Taint, ...]:
    """Settings: a list of ``key[=value]:Effect`` strings or ``{key, value, effect}`` mappings.

    Raises ValueError naming every problem.
    """
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list of taints (KEY[=VALUE]:EFFECT or {{key, value, effect}})")
    problems = Problems()
    items = [taint_fields(item) if isinstance(item, str) else item for item in raw]
    taints = read_taints(Fields({where: items}, "", problems, known=(where,)), where)
    if problems:
        raise ValueError("; ".join(str(p) for p in problems.items))
    return taints
