"""Go-style durations ("1h30m", "45s", "500ms") as float seconds, exactly.

Shared by the manifests (Kueue's Configuration), the settings files and the
agent's eviction policy, so every place that reads a duration accepts the
same text and says the same thing about bad text.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["parse_duration"]

_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "μs": Fraction(1, 10**6),
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}


def parse_duration(text: str, *, allow_negative: bool = True) -> float:
    """Seconds in ``text``; ValueError naming the text when it is not a duration.

    Units h, m, s, ms, us/µs and ns may be combined (``1h30m``); a lone
    ``0`` needs no unit.  Exact arithmetic, one rounding at the end.
    """
    body = text.strip()
    sign = 1
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if sign < 0 and not allow_negative:
        raise ValueError(f"duration {text!r} is negative")
    if body == "0":
        return 0.0
    total = Fraction(0)
    pos = 0
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None:
            break
        total += Fraction(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos == 0 or pos != len(body):
        raise ValueError(f"{text!r} is not a duration such as 90s, 1m30s or 2h")
    return float(sign * total)
