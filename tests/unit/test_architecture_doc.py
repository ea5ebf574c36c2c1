"""docs/architecture.md stays true: every module or package its module map names exists, and no package is left out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def module_map() -> list[str]:
    text = DOC.read_text()
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`(sluicegate/[A-Za-z0-9_/.]*)`", section)


def test_every_path_in_the_module_map_exists() -> None:
    names = module_map()
    assert len(names) > 20
    missing = [n for n in names if not (ROOT / n).exists()]
    assert missing == []


def test_every_package_is_in_the_module_map() -> None:
    named = {n.rstrip("/") for n in module_map()}
    packages = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "sluicegate").rglob("__init__.py")}
    assert sorted(packages - named) == []


def test_the_readme_links_the_architecture() -> None:
    assert "docs/architecture.md" in (ROOT / "README.md").read_text()
