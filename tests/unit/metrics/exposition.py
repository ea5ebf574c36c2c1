"""Reading an exposition back with prometheus_client's own parser, for the metrics tests."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from sluicegate.common.metrics import render


class Scrape:
    """One scrape, parsed: families by name, and a sample's value by its name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples: list[Sample] = [s for f in self.families.values() for s in f.samples]

    @classmethod
    def of(cls, registry: CollectorRegistry) -> Scrape:
        return cls(render(registry).decode("utf-8"))

    def type_of(self, family: str) -> str:
        return self.families[family].type

    def value(self, metric: str, /, **labels: str) -> float | None:
        """The sample whose name and labels are exactly these; None when there is none."""
        found = [s.value for s in self.samples if s.name == metric and s.labels == labels]
        assert len(found) <= 1, f"{metric}{labels} appears {len(found)} times"
        return found[0] if found else None

    def series(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample called ``name``: sorted label pairs -> value."""
        return {tuple(sorted(s.labels.items())): s.value for s in self.samples if s.name == name}

    def names(self) -> set[str]:
        """Every name a query can use: each family's samples' names, also for a family without samples yet."""
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
        derived = {f.name + suffix for f in self.families.values() for suffix in suffixes.get(f.type, ("",))}
        return derived | {s.name for s in self.samples}
