"""The committed gRPC/protobuf modules are exactly what proto/ generates today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_stubs_are_fresh(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    fresh = {p.name: p.read_text() for p in (tmp_path / "sluicegate" / "v1").iterdir() if p.is_file()}
    committed = {p.name: p.read_text() for p in (ROOT / "sluicegate" / "v1").iterdir() if p.is_file()}
    stale = sorted(name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name))
    assert stale == [], f"run `python scripts/gen_proto.py` and commit: stale generated files {stale}"
