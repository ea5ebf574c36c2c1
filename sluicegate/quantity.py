"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as exact integers.

Quota arithmetic never touches floats.  Every quantity is held as an integer
in its resource's canonical unit, the same units Kueue uses internally:

* ``cpu`` in millicores ("500m" -> 500, "2" -> 2000);
* everything else (memory, ephemeral-storage, pods, extended resources) in
  whole units, rounded up ("1.5Ki" -> 1536, "0.5" -> 1).

Parsing follows the grammar of ``k8s.io/apimachinery`` ``resource.Quantity``:
an optionally signed decimal number followed by a binary-SI suffix (Ki..Ei),
a decimal-SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent
(e3, E-2).
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = [
    "QuantityError",
    "parse_quantity",
    "to_canonical",
    "parse_canonical",
    "format_canonical",
    "MILLI_RESOURCES",
]

# Resources whose canonical unit is the milli-unit.  Kubernetes' scheduler and
# Kueue both account CPU in millicores; any other resource uses whole units.
MILLI_RESOURCES = frozenset({"cpu"})

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(text: str | int | float) -> Fraction:
    """Return the exact value of a quantity string (or a plain YAML number)."""
    if isinstance(text, bool):
        raise QuantityError(f"quantity must be a string or number, got {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(repr(text))
    if not isinstance(text, str):
        raise QuantityError(f"quantity must be a string or number, got {type(text).__name__}")
    m = _RE.match(text.strip())
    if m is None or text.strip() == "":
        raise QuantityError(
            f"quantity {text!r} is not valid: expected a number with an optional suffix "
            "such as 500m, 2, 1.5Gi, 256Mi or 1e3"
        )
    value = Fraction(m.group("num"))
    if m.group("bin"):
        value *= _BINARY[m.group("bin")]
    elif m.group("exp"):
        exp = int(m.group("exp")[1:])
        value *= Fraction(10) ** exp
    else:
        value *= _DECIMAL[m.group("dec") or ""]
    return -value if m.group("sign") == "-" else value


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def to_canonical(resource: str, value: Fraction) -> int:
    """Convert an exact value to the resource's canonical integer unit (rounding up)."""
    if resource in MILLI_RESOURCES:
        return _ceil(value * 1000)
    return _ceil(value)


def parse_canonical(resource: str, text: str | int | float) -> int:
    """Parse a quantity for ``resource`` straight to its canonical integer."""
    return to_canonical(resource, parse_quantity(text))


def format_canonical(resource: str, amount: int) -> str:
    """Render a canonical integer the way a person would write it in a manifest."""
    if resource in MILLI_RESOURCES:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    if amount != 0 and ("memory" in resource or "storage" in resource):
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)
