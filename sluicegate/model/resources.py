"""Flavor/resource keys and integer quantities.

Quantities are plain ``int`` in the resource's canonical unit (millicores for
cpu, whole units otherwise; see :mod:`sluicegate.quantity`).  The arithmetic
over cohort trees lives in :mod:`sluicegate.controller.scheduling.quota`.
"""

from __future__ import annotations

from typing import NamedTuple

from sluicegate.model.names import FlavorName


class FlavorResource(NamedTuple):
    """One cell of a quota table: a resource of one flavor."""

    flavor: FlavorName
    resource: str

    def __str__(self) -> str:
        return f"{self.resource} in flavor {self.flavor}"


# Totals per flavor/resource.  Callers treat these dicts as values: build a
# new one rather than mutate one they did not create.
Quantities = dict[FlavorResource, int]
