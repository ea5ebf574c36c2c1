"""metadata.generateName, as the Kubernetes API server reads it.

A document with ``generateName`` and no ``name`` gets the prefix plus five
random characters (Kubernetes' alphabet: lowercase consonants and digits
that cannot spell words), drawn again while the name is taken.  A document
with a name keeps it; ``generateName`` is then dropped, as Kubernetes ignores it.
Only creation generates names: ``apply`` needs ``metadata.name``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace

from sluicegate.manifest.loader import RawDocument

ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5
# A generated name stays a DNS label (63): the prefix is cut to leave room for the suffix.
MAX_PREFIX = 63 - SUFFIX_LENGTH
# Draws before giving up; with 27**5 (14 million) suffixes per prefix, a
# second draw is already rare.
ATTEMPTS = 8


class NameTaken(Exception):
    """Every drawn name was taken."""

    def __init__(self, namespace: str, prefix: str) -> None:
        self.namespace, self.prefix = namespace, prefix
        super().__init__(f"no free name found for metadata.generateName {prefix!r} in namespace {namespace!r} "
                         f"after {ATTEMPTS} tries; retry, or use a longer prefix")


def random_suffix() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(SUFFIX_LENGTH))


def generate_name(
    doc: RawDocument, taken: Callable[[str, str], bool], *, suffix: Callable[[], str] = random_suffix,
) -> RawDocument:
    """``doc`` with a name drawn from its metadata.generateName (the same document when it has none).

    ``taken(namespace, name)`` says whether a name is in use.  A generateName
    that is not a string is left for the decoder to report.
    """
    meta = doc.body.get("metadata")
    if not isinstance(meta, dict) or "generateName" not in meta:
        return doc
    prefix = meta["generateName"]
    rest = {k: v for k, v in meta.items() if k != "generateName"}
    if not isinstance(prefix, str) or not prefix:
        return doc
    if meta.get("name"):
        return replace(doc, body={**doc.body, "metadata": rest})
    ns = meta.get("namespace")
    namespace = ns if isinstance(ns, str) and ns else "default"
    name = draw_name(namespace, prefix, taken, suffix=suffix)
    return replace(doc, body={**doc.body, "metadata": {**rest, "name": name}})


def draw_name(
    namespace: str, prefix: str, taken: Callable[[str, str], bool], *, suffix: Callable[[], str] = random_suffix,
) -> str:
    """A name from the prefix (cut to leave room for the suffix) that ``taken`` says is free; NameTaken
    after ATTEMPTS draws.  Also the typed creation item's generate_name."""
    prefix = prefix[:MAX_PREFIX]
    for _ in range(ATTEMPTS):
        name = prefix + suffix()
        if not taken(namespace, name):
            return name
    raise NameTaken(namespace, prefix)
