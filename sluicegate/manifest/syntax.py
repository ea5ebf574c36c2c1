"""Kubernetes name syntax: DNS-1123 names, label keys and values, resource names.

Each check returns ``None`` when the text is fine, otherwise a message that
says what was expected and echoes what was found.  The rules are those of
``k8s.io/apimachinery/pkg/util/validation`` so a name valid here is valid in
a Kubernetes cluster and the other way round.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

__all__ = [
    "show",
    "dns_label_problem",
    "dns_subdomain_problem",
    "qualified_name_problem",
    "label_value_problem",
    "container_resource_name_problem",
    "decimal_text",
]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

# Resource names a container may request without a domain prefix.  Anything
# else needs one (example.com/gpu), exactly as the Kubernetes API server
# demands; this catches "cpus" and "mem" before they silently request nothing.
STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def show(value: object) -> str:
    """Render a value found in a manifest for an error message (strings in double quotes)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def dns_label_problem(text: str) -> str | None:
    if len(text) > DNS_LABEL_MAX or not _DNS_LABEL.match(text):
        return (
            "must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {DNS_LABEL_MAX} characters), got {show(text)}"
        )
    return None


def dns_subdomain_problem(text: str) -> str | None:
    if len(text) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.match(text):
        return (
            "must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', starting and "
            f"ending with a letter or digit, at most {DNS_SUBDOMAIN_MAX} characters), got {show(text)}"
        )
    return None


def qualified_name_problem(text: str) -> str | None:
    """Label keys, annotation keys and resource names: ``[prefix/]name``."""
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or dns_subdomain_problem(prefix) is not None):
        return (
            f"must be a qualified name: the prefix before '/' must be a DNS-1123 subdomain "
            f"such as example.com, got {show(text)}"
        )
    if len(name) > QUALIFIED_NAME_MAX or not _QUALIFIED_PART.match(name):
        return (
            "must be a qualified name ([prefix/]name where name has letters, digits, '-', '_' "
            f"and '.', starts and ends with a letter or digit, at most {QUALIFIED_NAME_MAX} "
            f"characters), got {show(text)}"
        )
    return None


def label_value_problem(text: str) -> str | None:
    if len(text) > LABEL_VALUE_MAX or not _LABEL_VALUE.match(text):
        return (
            "must be a label value (empty, or letters, digits, '-', '_' and '.' starting and "
            f"ending with a letter or digit, at most {LABEL_VALUE_MAX} characters), got {show(text)}"
        )
    return None


def container_resource_name_problem(text: str) -> str | None:
    problem = qualified_name_problem(text)
    if problem is not None:
        return problem
    if "/" not in text and text not in STANDARD_CONTAINER_RESOURCES and not text.startswith("hugepages-"):
        return (
            "must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed "
            f"extended resource such as example.com/gpu, got {show(text)}"
        )
    return None


def decimal_text(value: Fraction, *, max_digits: int = 9) -> str:
    """Plain decimal text of a number, exact when it has a finite decimal form.

    A value like 1/3 has none; it is rounded to ``max_digits`` decimals
    (Kubernetes quantities keep nano precision too).
    """
    sign = "-" if value < 0 else ""
    value = abs(value)
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        value = Fraction(round(value * 10**max_digits), 10**max_digits)
    whole, rest = divmod(value, 1)
    digits = ""
    # A denominator of 2^a*5^b needs max(a, b) digits; the bound only
    # guards against a bug above.
    for _ in range(2000):
        if rest == 0:
            break
        rest *= 10
        digit, rest = divmod(rest, 1)
        digits += str(digit)
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"
