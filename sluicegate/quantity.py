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
    "MAX_MILLI_VALUE",
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


# Kubernetes' bound: a Quantity's value in milli-units must fit a signed
# 64-bit integer (MilliValue() is an int64), so no magnitude above
# (2**63 - 1) / 1000 is representable.  Every canonical amount (millicores,
# bytes, counts) is then at most 2**63 - 1 and fits protobuf's int64.
MAX_MILLI_VALUE = 2**63 - 1
# Exponents beyond these change nothing a bounded quantity can hold: a larger
# one is refused as out of range, a smaller one is below every unit's
# resolution.  Clamping first keeps "1e999999999" from computing 10**999999999.
_MAX_EXPONENT = 40
# No quantity within the bound needs more characters than this to be written.
_MAX_TEXT = 64


def _out_of_range(text: object) -> QuantityError:
    return QuantityError(
        f"quantity {text!r} is out of range: Kubernetes quantities are limited to "
        f"{MAX_MILLI_VALUE // 1000} units (a milli-value of 2^63-1)"
    )


def parse_quantity(text: str | int | float) -> Fraction:
    """Return the exact value of a quantity string (or a plain YAML number)."""
    if isinstance(text, bool):
        raise QuantityError(f"quantity must be a string or number, got {text!r}")
    if isinstance(text, int):
        return _bounded(Fraction(text), text)
    if isinstance(text, float):
        if text != text or text in (float("inf"), float("-inf")):
            raise QuantityError(f"quantity must be a finite number, got {text!r}")
        return _bounded(Fraction(repr(text)), text)
    if not isinstance(text, str):
        raise QuantityError(f"quantity must be a string or number, got {type(text).__name__}")
    if len(text) > _MAX_TEXT:
        raise QuantityError(f"quantity {text[:20]!r}... is not valid: longer than {_MAX_TEXT} characters")
    m = _RE.match(text.strip())
    if m is None or text.strip() == "":
        raise QuantityError(
            f"quantity {text!r} is not valid: expected a number with an optional suffix "
            "such as 500m, 2, 1.5Gi, 256Mi or 1e3"
        )
    num = m.group("num")
    value = Fraction(num)
    if m.group("bin"):
        value *= _BINARY[m.group("bin")]
    elif m.group("exp"):
        exp_text = m.group("exp")[1:].lstrip("+-").lstrip("0") or "0"
        if len(exp_text) > 6:
            exp_text = "999999"  # clamped below either way
        exp = int(exp_text) * (-1 if m.group("exp")[1:2] == "-" else 1)
        if value != 0:
            # Clamp so the power stays small: the result is out of range or
            # below any resolution the same way as with the real exponent.
            exp = max(-(len(num) + _MAX_EXPONENT), min(exp, len(num) + _MAX_EXPONENT))
            value *= Fraction(10) ** exp
    else:
        value *= _DECIMAL[m.group("dec") or ""]
    return _bounded(-value if m.group("sign") == "-" else value, text)


def _bounded(value: Fraction, text: object) -> Fraction:
    if abs(value) * 1000 > MAX_MILLI_VALUE:
        raise _out_of_range(text)
    return value


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
        binary = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
        for suffix, factor in binary:
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)
