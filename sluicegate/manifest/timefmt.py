"""Timestamps and durations as Kubernetes writes them.

Timestamps are RFC 3339 (``2024-05-01T12:00:00Z``, optional fraction and
offset) and become seconds since the epoch as a float.  Durations are Go's
``time.ParseDuration`` syntax (``1h30m``, ``45s``, ``500ms``), used by
metav1.Duration fields in the Configuration, and become seconds.

Both directions are exact for the values this project produces: formatting
writes the shortest decimal that parses back to the very same float, so a
workload's creation time survives a trip through the store unchanged (FIFO
order is decided by it).
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import re
from fractions import Fraction

from sluicegate.durations import parse_duration as _parse_duration
from sluicegate.manifest.syntax import decimal_text

__all__ = ["parse_rfc3339", "format_rfc3339", "parse_duration", "format_duration"]

_RFC3339 = re.compile(
    r"^(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[Tt]"
    r"(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:\.(?P<frac>\d{1,30}))?"
    r"(?P<tz>[Zz]|[+-]\d{2}:\d{2})$"
)
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
# Enough digits to single out any float of at least one second (a double
# has 53 bits, about 16 significant decimal digits).  Timestamps of this era
# need 7; Kubernetes itself writes none.
_MAX_FRACTION_DIGITS = 17


@functools.lru_cache(maxsize=1 << 16)
def parse_rfc3339(text: str) -> float:
    """``2024-05-01T12:00:00Z`` -> 1714564800.0.  Raises ValueError on anything else."""
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(
            f"{text!r} is not an RFC 3339 timestamp; expected the form 2024-05-01T12:00:00Z "
            "(optionally with a fraction of a second and a +hh:mm offset)"
        )
    try:
        day = _dt.date(int(m["y"]), int(m["mo"]), int(m["d"]))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a real calendar date: {exc}") from None
    hour, minute, second = int(m["h"]), int(m["mi"]), int(m["s"])
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"{text!r} has a time of day out of range")
    offset = 0
    tz = m["tz"]
    if tz not in ("Z", "z"):
        off_h, off_m = int(tz[1:3]), int(tz[4:6])
        if off_h > 23 or off_m > 59:
            raise ValueError(f"{text!r} has a UTC offset out of range")
        offset = (off_h * 3600 + off_m * 60) * (1 if tz[0] == "+" else -1)
    whole = (day.toordinal() - _EPOCH_ORDINAL) * 86400 + hour * 3600 + minute * 60 + second - offset
    frac = m["frac"]
    if not frac:
        return float(whole)
    # Exact rational first, one rounding at the end: the float we return is
    # the one nearest the written instant, so formatting it again gives the
    # same text back.
    return float(Fraction(whole) + Fraction(int(frac), 10 ** len(frac)))


# A workload's timestamps are formatted again and again (the conditions of one
# admission share their time, as do the admissions of one scheduling cycle; a
# workload's creation time goes out with every reply about it) while each new
# one is formatted once: a plain dict, emptied when full, costs a lookup on a
# hit and little on a miss (lru_cache's bookkeeping cost a third of the
# conversion itself).  Small, so that a miss's insertion stays cheap: the times
# that repeat are recent ones.
_STAMPS_SIZE = 4096
_stamps: dict[float, str] = {}


def format_rfc3339(epoch: float) -> str:
    """Seconds since the epoch -> ``2024-05-01T12:00:00Z``, with the shortest exact fraction."""
    text = _stamps.get(epoch)
    if text is None:
        text = _format_rfc3339(epoch)
        if len(_stamps) >= _STAMPS_SIZE:
            _stamps.clear()
        _stamps[epoch] = text
    return text


def _format_rfc3339(epoch: float) -> str:
    # A float of this era takes the shortest path: no finiteness test (the bounds leave out nan and the
    # infinities) and one f-string.
    if type(epoch) is float and _FAST_MIN <= epoch < _FAST_MAX:
        # repr() is the shortest decimal that reads back as this float, and
        # with the integer part fixed "fewest significant digits" is "fewest
        # fraction digits": the same text _format_exact finds, without the
        # Fraction arithmetic.  Below 1e16 repr writes "<int>.<fraction>" and
        # the fraction ends in a zero only when it is "0" (a whole second).
        whole, _, frac = _float_repr(epoch).partition(".")
        second = _seconds.get(whole)
        if second is None:
            if len(_seconds) >= _SECONDS_SIZE:
                _seconds.clear()
            second = _seconds[whole] = _whole_seconds(int(whole))
        return f"{second}Z" if frac == "0" else f"{second}.{frac}Z"
    if not math.isfinite(epoch):
        raise ValueError(f"timestamp {epoch!r} is not a finite number of seconds")
    if _FAST_MIN <= epoch < _FAST_MAX:
        # (An int, or a float subclass: written by its value, whatever its own repr says.)
        whole, _, frac = (_float_repr(epoch) if isinstance(epoch, float) else repr(epoch)).partition(".")
        frac = frac.rstrip("0")
        return _whole_seconds(int(whole)) + ("." + frac if frac else "") + "Z"
    return _format_exact(epoch)


_float_repr = float.__repr__
# The date and time of day of a whole second, by its decimal text (the part of repr() before the point):
# the timestamps of a burst share a few seconds.
_SECONDS_SIZE = 4096
_seconds: dict[str, str] = {}


# Seconds at which repr(epoch) is plain "<int>.<fraction>" and the date is
# within datetime's range (year 9999); outside, _format_exact decides (and
# raises where datetime does).
_FAST_MIN = 1.0
_FAST_MAX = float((_dt.date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL + 1) * 86400)


@functools.lru_cache(maxsize=1 << 12)
def _whole_seconds(whole: int) -> str:
    # Many timestamps of one burst share their second.
    return (_dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=whole)).strftime("%Y-%m-%dT%H:%M:%S")


def _format_exact(epoch: float) -> str:
    """The reference conversion: the fewest fraction digits that parse back to ``epoch``."""
    exact = Fraction(epoch)
    digits = 0
    scaled = round(exact)
    while digits < _MAX_FRACTION_DIGITS and scaled / 10**digits != epoch:
        digits += 1
        scaled = round(exact * 10**digits)
    whole, frac = divmod(scaled, 10**digits)
    stamp = _whole_seconds(whole)
    if digits:
        stamp += "." + str(frac).rjust(digits, "0")
    return stamp + "Z"


def parse_duration(text: str) -> float:
    """Go duration (``1h30m``, ``45s``, ``500ms``, ``-1.5h``) -> seconds (see :mod:`sluicegate.durations`)."""
    return _parse_duration(text)


def format_duration(seconds: float) -> str:
    """Seconds -> a Go duration string that parses back to the same float (``5400.0`` -> ``1h30m``)."""
    if not math.isfinite(seconds):
        raise ValueError(f"duration {seconds!r} is not a finite number of seconds")
    # repr() is the shortest decimal that reads back as this float; working
    # from it keeps the text short and the round trip exact.
    exact = Fraction(repr(abs(seconds)))
    if exact == 0:
        return "0s"
    hours, rest = divmod(exact, 3600)
    minutes, secs = divmod(rest, 60)
    out = "-" if seconds < 0 else ""
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs or not (hours or minutes):
        out += decimal_text(secs) + "s"
    return out

