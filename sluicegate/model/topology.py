"""Topology Aware Scheduling values: Kueue's Topology, a pod set's topology request, and the
topology assignment recorded on its admission (docs/topology.md)."""

from __future__ import annotations

from dataclasses import dataclass

# The podset annotations Kueue reads on a pod template (apis/kueue/v1beta2/topology_types.go).
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Topology:
    """Ordered node label keys, from the widest level (block) down to the narrowest (hostname)."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Kueue's PodSetTopologyRequest: at most one of required, preferred, unconstrained."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slice_required: str | None = None
    slice_size: int | None = None

    @property
    def explicit(self) -> bool:
        """Whether it asks for TAS at all (Kueue's IsExplicitlyRequestingTAS)."""
        return (self.required is not None or self.preferred is not None or self.unconstrained
                or self.slice_required is not None)

    def describe(self) -> str:
        if self.required is not None:
            text = f"required {self.required}"
        elif self.preferred is not None:
            text = f"preferred {self.preferred}"
        else:
            text = "unconstrained"
        if self.slice_required is not None:
            text += f", slices of {self.slice_size} in one {self.slice_required}"
        return text


@dataclass(frozen=True, slots=True)
class TopologyDomain:
    """One domain of an assignment: its label values for each level, and how many pods go there."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a pod set's pods go: ``levels`` are node label keys (only the hostname when the topology
    ends in it, as Kueue records), each domain gives their values and a pod count."""

    levels: tuple[str, ...]
    domains: tuple[TopologyDomain, ...]

    def selectors(self) -> list[tuple[dict[str, str], int]]:
        return [(dict(zip(self.levels, d.values, strict=True)), d.count) for d in self.domains]

    def describe(self) -> str:
        parts = [f"{'/'.join(d.values)}={d.count}" for d in self.domains]
        return f"{'/'.join(self.levels)}: {', '.join(parts)}"
