"""Imports point inward: the pure cores import only the stdlib and each other."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "sluicegate"

PURE = {
    "model": ("sluicegate.model", "sluicegate.quantity"),
    "controller/scheduling": ("sluicegate.model", "sluicegate.controller.scheduling", "sluicegate.quantity"),
    "agent/policy": ("sluicegate.agent.policy", "sluicegate.quantity", "sluicegate.durations"),
}


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


@pytest.mark.parametrize("package", sorted(PURE))
def test_pure_package_imports_only_stdlib_and_inner_layers(package: str) -> None:
    allowed = PURE[package]
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for mod in imports_of(path):
            top = mod.split(".")[0]
            if top == "sluicegate":
                if not any(mod == a or mod.startswith(a + ".") for a in allowed):
                    bad.append(f"{path.relative_to(ROOT)}: {mod}")
            elif top not in sys.stdlib_module_names or top in ("asyncio", "sqlite3", "socket", "logging"):
                bad.append(f"{path.relative_to(ROOT)}: {mod}")
    assert bad == []


def test_only_transport_modules_import_generated_stubs() -> None:
    allowed = ("controller/service/", "controller/server.py", "agent/link", "agent/server.py", "client.py", "v1/")
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if any(rel.startswith(a) for a in allowed):
            continue
        if any(m.startswith("sluicegate.v1") for m in imports_of(path)):
            bad.append(rel)
    assert bad == []



def resolve(package: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``package``."""
    if not level:
        return module or ""
    parts = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join([*parts, *([module] if module else [])])


def absolute_imports_of(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved against its package."""
    package = ".".join(["sluicegate", *path.relative_to(ROOT).parent.parts])
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append(resolve(package, node.level, node.module))
    return out


@pytest.mark.parametrize(
    ("package", "level", "module", "want"),
    [
        ("sluicegate.manifest", 0, "sluicegate.model", "sluicegate.model"),
        ("sluicegate.manifest", 1, "errors", "sluicegate.manifest.errors"),
        ("sluicegate.manifest", 1, None, "sluicegate.manifest"),
        ("sluicegate.manifest", 2, "controller", "sluicegate.controller"),
        ("sluicegate.controller.service", 2, "manager", "sluicegate.controller.manager"),
    ],
)
def test_relative_imports_resolve(package: str, level: int, module: str | None, want: str) -> None:
    assert resolve(package, level, module) == want


def test_manifest_does_not_import_the_controller() -> None:
    """Manifests decode to and encode from the model; the controller is never needed (sluicectl reads them too)."""
    bad = [
        f"{path.relative_to(ROOT)}: {mod}"
        for path in sorted((ROOT / "manifest").rglob("*.py"))
        for mod in absolute_imports_of(path)
        if mod == "sluicegate.controller" or mod.startswith("sluicegate.controller.")
    ]
    assert bad == []


@pytest.mark.parametrize(("side", "other"), [("agent", "sluicegate.controller"), ("controller", "sluicegate.agent")])
def test_agent_and_controller_do_not_import_each_other(side: str, other: str) -> None:
    """Shared code lives in sluicegate/common (or model, security, quantity), never on the other side."""
    bad = []
    for path in sorted((ROOT / side).rglob("*.py")):
        for mod in imports_of(path):
            if mod == other or mod.startswith(other + "."):
                bad.append(f"{path.relative_to(ROOT)}: {mod}")
    assert bad == []


def test_agent_modules_stay_small() -> None:
    """One layer per module: none of the agent's grows past 700 lines (split it instead)."""
    big = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "agent").rglob("*.py"))
           if (n := len(p.read_text().splitlines())) >= 700}
    assert big == {}
