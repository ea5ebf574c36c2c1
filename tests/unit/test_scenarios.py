"""`sluicectl simulate` on the scenario files under tests/scenarios gives exactly the expected decisions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
CASES = sorted(p for p in SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("scenario", CASES, ids=[p.stem for p in CASES])
def test_simulate_scenario(scenario: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "sluicegate.cli.main", "simulate", "-f", str(scenario)],
                         capture_output=True, text=True, timeout=60, check=True)
    expected = json.loads(scenario.with_suffix(".expected.json").read_text())
    assert json.loads(res.stdout) == expected


def test_simulate_rejects_a_bad_file_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: sluicegate.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: x}\n"
                   "spec: {queueingStrategy: Sideways}\n")
    res = subprocess.run([sys.executable, "-m", "sluicegate.cli.main", "simulate", "-f", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "spec.queueingStrategy" in res.stderr and res.stderr.count("\n") == 1
