"""Topology objects on a controller: applied, listed, kept across a restart, guarded as Kueue guards
them (an in-use finalizer on a Topology a ResourceFlavor names; immutable topologyName; levels
mutable only with kubernetes.io/hostname as the lowest level)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.controller.errors import FailedPrecondition, InvalidArgument
from sluicegate.controller.manager import Manager
from sluicegate.controller.store.sqlite import SqliteStore
from sluicegate.manifest.loader import parse_text
from sluicegate.model.topology import Topology
from tests.unit.controller.test_manager import Clock

TOPOLOGY = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: default}
spec:
  levels: [{nodeLabel: %s}, {nodeLabel: kubernetes.io/hostname}]
"""
FLAVOR = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tas}
spec: {nodeLabels: {pool: tas}, topologyName: %s}
"""


def test_topology_lifecycle(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "store.db"))
    m = Manager(store, clock=Clock(), placement=False)
    m.apply(parse_text(TOPOLOGY % "example.com/rack" + "---" + FLAVOR % "default", "t.yaml"))
    assert m.list("topologies") == [Topology("default", ("example.com/rack", "kubernetes.io/hostname"))]
    # hostname stays the lowest level: the other levels may change.
    m.apply(parse_text(TOPOLOGY % "example.com/block", "t.yaml"))
    with pytest.raises(InvalidArgument, match="topologyName is immutable"):
        m.apply(parse_text(FLAVOR % "other", "f.yaml"))
    with pytest.raises(FailedPrecondition, match="Topology default is used by ResourceFlavor"):
        m.delete("topology", "", "default")
    store.close()
    # A restarted controller has them back.
    again = Manager(SqliteStore(str(tmp_path / "store.db")), clock=Clock(), placement=False)
    again.load()
    assert again.cache.topologies["default"].levels == ("example.com/block", "kubernetes.io/hostname")
    assert again.cache.flavors["tas"].topology_name == "default"  # type: ignore[index]
    again.delete("resourceflavor", "", "tas")
    assert again.delete("topology", "", "default")
    assert again.list("topologies") == []


def test_levels_without_hostname_are_immutable(tmp_path: Path) -> None:
    m = Manager(SqliteStore(str(tmp_path / "store.db")), clock=Clock(), placement=False)
    doc = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: t}\nspec: {levels: [{nodeLabel: %s}]}"
    m.apply(parse_text(doc % "example.com/rack", "t.yaml"))
    with pytest.raises(InvalidArgument, match="levels are mutable only when"):
        m.apply(parse_text(doc % "example.com/block", "t.yaml"))
