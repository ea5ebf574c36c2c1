"""Errors raised while reading manifests.

A manifest is rejected whole: the codec collects every problem in a document
before raising, so a user fixes a file in one pass instead of one error at a
time.  Callers match on the exception type and read ``errors``; the text is
for people.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem, located by a Kubernetes-style field path.

    ``path`` looks like ``spec.resourceGroups[0].flavors[1].resources[0].nominalQuota``
    (map keys in brackets: ``resources.requests[pods]``); it is empty when the
    problem concerns the whole document.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ManifestError(Exception):
    """A document (or file) that cannot be used; nothing from it was applied.

    ``source`` names where the document came from (``queues.yaml#2`` is the
    second document of queues.yaml); ``kind``/``name`` identify the object
    when the document got far enough to say; ``line`` is set for problems the
    YAML/JSON parser located.
    """

    def __init__(
        self,
        source: str,
        errors: Sequence[FieldError],
        *,
        kind: str = "",
        name: str = "",
        line: int | None = None,
    ) -> None:
        self.source = source
        self.errors: list[FieldError] = list(errors)
        self.kind = kind
        self.name = name
        self.line = line
        super().__init__(str(self))

    @property
    def header(self) -> str:
        """``queues.yaml#2 ClusterQueue/team-a``: where, and which object."""
        parts = []
        if self.source:
            parts.append(self.source if self.line is None else f"{self.source} (line {self.line})")
        if self.name:
            parts.append(f"{self.kind or '?'}/{self.name}")
        elif self.kind:
            parts.append(self.kind)
        return " ".join(parts)

    def lines(self) -> list[str]:
        header = self.header
        return [f"{header}: {err}" if header else str(err) for err in self.errors]

    def __str__(self) -> str:
        return "\n".join(self.lines())


class ManifestErrors(Exception):
    """Several documents failed; each entry is the error of one document."""

    def __init__(self, errors: Iterable[ManifestError]) -> None:
        self.errors: list[ManifestError] = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(line for err in self.errors for line in err.lines())
