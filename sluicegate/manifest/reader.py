"""Strict, path-aware reading of one manifest document.

Every mapping is opened with the list of fields it may hold, so a typo or a
Kubernetes field sluicegate cannot honour is reported with its full path the
moment the mapping is opened.  Accessors never raise: they record a
:class:`FieldError` and return a harmless default, so one pass over a
document finds all of its problems.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from sluicegate.manifest.errors import FieldError
from sluicegate.manifest.syntax import show
from sluicegate.quantity import MAX_MILLI_VALUE, QuantityError, parse_quantity, to_canonical

__all__ = ["Problems", "Fields", "Amount", "join", "index", "keyed", "INT32_MAX", "INT32_MIN"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT32_MIN = -(2**31)

T = TypeVar("T")

# A syntax check: None when fine, else a message.
Check = Callable[[str], "str | None"]


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def keyed(path: str, key: str) -> str:
    return f"{path}[{key}]"


class Problems:
    """The errors found so far in one document, in the order they were found."""

    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldError(path, message))

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class Amount:
    """A quantity as written (``text``), exactly (``exact``) and in canonical units."""

    text: str
    exact: Fraction
    canonical: int


def unknown_field(key: str, known: Collection[str]) -> str:
    """What every decoder says of a field it does not know: the closest known name, or the known ones."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"unknown field; did you mean {show(close[0])}?"
    if known:
        return "unknown field; expected one of: " + ", ".join(sorted(known))
    return "unknown field; this object takes no fields here"


def _type_hint(value: object) -> str:
    if isinstance(value, bool):
        return " (YAML reads yes/no/on/off/true/false as booleans; quote the value)"
    if isinstance(value, (int, float)):
        return " (quote the value in YAML)"
    return ""


class Fields:
    """One mapping of a manifest, read strictly.

    ``known`` lists the fields sluicegate reads here; ``unsupported`` maps
    fields of the Kubernetes/Kueue schema that sluicegate cannot honour to the
    reason why.  Anything else is a typo or a field from another API and is
    reported as unknown.  A ``null`` value counts as absent, as in Kubernetes.
    """

    def __init__(
        self,
        body: Mapping[object, object],
        path: str,
        problems: Problems,
        *,
        known: Iterable[str],
        unsupported: Mapping[str, str] | None = None,
    ) -> None:
        self._body = body
        self._path = path
        self.problems = problems
        self._known = frozenset(known)
        for key in body:
            if not isinstance(key, str):
                problems.add(path, f"field names must be strings, got {show(key)}")
            elif key in self._known:
                continue
            elif unsupported and key in unsupported:
                problems.add(join(path, key), f"not supported: {unsupported[key]}")
            else:
                problems.add(join(path, key), unknown_field(key, self._known))

    @staticmethod
    def of(
        value: object,
        path: str,
        problems: Problems,
        *,
        known: Iterable[str],
        unsupported: Mapping[str, str] | None = None,
    ) -> Fields | None:
        if not isinstance(value, dict):
            problems.add(path, f"must be a mapping, got {show(value)}")
            return None
        return Fields(value, path, problems, known=known, unsupported=unsupported)

    # -- plumbing ---------------------------------------------------------

    @property
    def base(self) -> str:
        return self._path

    def path(self, key: str) -> str:
        return join(self._path, key)

    def get(self, key: str) -> object | None:
        if key not in self._known:
            raise KeyError(f"codec bug: field {key!r} read at {self._path or '<root>'} but not declared")
        return self._body.get(key)

    def has(self, key: str) -> bool:
        return self.get(key) is not None

    def error(self, key: str, message: str) -> None:
        self.problems.add(self.path(key), message)

    def _missing(self, key: str, required: bool) -> None:
        if required:
            self.error(key, "required field is missing")

    # -- scalars ----------------------------------------------------------

    def string(self, key: str, *, default: str = "", required: bool = False, check: Check | None = None) -> str:
        value = self.get(key)
        if value is None:
            self._missing(key, required)
            return default
        if not isinstance(value, str):
            self.error(key, f"must be a string, got {show(value)}{_type_hint(value)}")
            return default
        if required and value == "":
            self.error(key, "required field is empty")
            return default
        if check is not None and value != "":
            problem = check(value)
            if problem is not None:
                self.error(key, problem)
        return value

    def optional_string(self, key: str, *, check: Check | None = None) -> str | None:
        if not self.has(key):
            return None
        return self.string(key, check=check)

    def integer(
        self,
        key: str,
        *,
        default: int | None = None,
        required: bool = False,
        minimum: int | None = INT32_MIN,
        maximum: int | None = INT32_MAX,
    ) -> int | None:
        value = self.get(key)
        if value is None:
            self._missing(key, required)
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(key, f"must be an integer, got {show(value)}")
            return default
        if minimum is not None and value < minimum:
            if minimum == 0:
                self.error(key, f"must be non-negative, got {value}")
            else:
                self.error(key, f"must be at least {minimum}, got {value}")
            return default
        if maximum is not None and value > maximum:
            self.error(key, f"must be at most {maximum}, got {value}")
            return default
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(key, f"must be true or false, got {show(value)}")
            return default
        return value

    def choice(self, key: str, options: Mapping[str, T], *, default: T, required: bool = False) -> T:
        value = self.get(key)
        if value is None:
            self._missing(key, required)
            return default
        if not isinstance(value, str) or value not in options:
            self.error(key, f"must be one of {', '.join(options)}, got {show(value)}")
            return default
        return options[value]

    def quantity(self, key: str, resource: str, *, required: bool = False) -> Amount | None:
        value = self.get(key)
        if value is None:
            self._missing(key, required)
            return None
        return read_quantity(value, self.path(key), resource, self.problems)

    # -- containers -------------------------------------------------------

    def mapping(
        self,
        key: str,
        *,
        known: Iterable[str],
        unsupported: Mapping[str, str] | None = None,
        required: bool = False,
    ) -> Fields | None:
        value = self.get(key)
        if value is None:
            self._missing(key, required)
            return None
        return Fields.of(value, self.path(key), self.problems, known=known, unsupported=unsupported)

    def items(
        self,
        key: str,
        *,
        required: bool = False,
        min_items: int = 0,
        max_items: int | None = None,
    ) -> list[tuple[str, object]]:
        """The elements of a list field, each with its own path."""
        value = self.get(key)
        if value is None:
            if required or min_items:
                self.error(key, "required field is missing" if required else f"must list at least {min_items} item(s)")
            return []
        if not isinstance(value, list):
            self.error(key, f"must be a list, got {show(value)}")
            return []
        if len(value) < min_items:
            self.error(key, f"must list at least {min_items} item(s), got {len(value)}")
        if max_items is not None and len(value) > max_items:
            self.error(key, f"must list at most {max_items} item(s), got {len(value)}")
        return [(index(self.path(key), i), item) for i, item in enumerate(value)]

    def strings(self, key: str, *, check: Check | None = None) -> tuple[str, ...]:
        out: list[str] = []
        for path, item in self.items(key):
            if not isinstance(item, str):
                self.problems.add(path, f"must be a string, got {show(item)}{_type_hint(item)}")
                continue
            if check is not None:
                problem = check(item)
                if problem is not None:
                    self.problems.add(path, problem)
            out.append(item)
        return tuple(out)

    def string_map(
        self,
        key: str,
        *,
        key_check: Check | None = None,
        value_check: Check | None = None,
        max_entries: int | None = None,
    ) -> dict[str, str]:
        value = self.get(key)
        if value is None:
            return {}
        path = self.path(key)
        if not isinstance(value, dict):
            self.problems.add(path, f"must be a mapping of strings, got {show(value)}")
            return {}
        if max_entries is not None and len(value) > max_entries:
            self.problems.add(path, f"must have at most {max_entries} entries, got {len(value)}")
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                self.problems.add(path, f"keys must be strings, got {show(k)}{_type_hint(k)}")
                continue
            if key_check is not None:
                problem = key_check(k)
                if problem is not None:
                    self.problems.add(keyed(path, k), f"key {problem}")
            if not isinstance(v, str):
                self.problems.add(keyed(path, k), f"must be a string, got {show(v)}{_type_hint(v)}")
                continue
            if value_check is not None:
                problem = value_check(v)
                if problem is not None:
                    self.problems.add(keyed(path, k), problem)
            out[k] = v
        return out


def read_quantity(value: object, path: str, resource: str, problems: Problems) -> Amount | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        problems.add(path, f"must be a quantity such as 500m, 2, 1.5Gi or 256Mi, got {show(value)}")
        return None
    text = value if isinstance(value, str) else repr(value)
    try:
        exact = parse_quantity(value)
    except QuantityError as exc:
        if "out of range" in str(exc) or "finite" in str(exc):
            problems.add(path, f"{text} is out of range: Kubernetes quantities hold at most "
                         f"{MAX_MILLI_VALUE // 1000} (a milli-value of 2^63-1)")
            return None
        problems.add(
            path,
            f'not a valid quantity: "{text}" (expected a number with an optional suffix such as '
            "500m, 2, 1.5Gi, 256Mi or 1e3)",
        )
        return None
    return Amount(text=text, exact=exact, canonical=to_canonical(resource, exact))
