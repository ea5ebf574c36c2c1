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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """sluicegate modules a module imports when it is loaded.

    Imports at module level count (inside ``try``/``if`` too) except those
    under ``if TYPE_CHECKING:``, which never run; imports inside functions run
    only when called, after every module is loaded, so they cannot form a
    cycle at import time and are left out.  ``from a import b`` where ``a.b``
    is a module is an import of ``a.b``.
    """
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        out.add(f"{base}.{a.name}")
                    elif base in modules:
                        out.add(base)
            elif isinstance(node, ast.If):
                test = node.test
                if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    visit(block)
    visit(ast.parse(path.read_text()).body)
    out.discard(me)
    return out


def import_cycles() -> list[list[str]]:
    """Every strongly connected group of sluicegate modules (more than one module) in the import graph."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py") if "/v1/" not in f"/{p.relative_to(ROOT)}"}
    graph = {m: sorted(_runtime_imports(p, set(paths))) for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def strongconnect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(groups)


def test_the_module_import_graph_has_no_cycle() -> None:
    assert import_cycles() == []


# Decision modules: they read state and return what must happen; carrying it out is commit.py's.
DECISIONS = ("controller/effects.py", "controller/decide_pods.py", "controller/decide_api.py",
             "controller/decide_cycle.py", "controller/lifecycle.py", "controller/timers.py")
IMPURE = ("asyncio", "grpc", "sqlite3", "psutil")


@pytest.mark.parametrize("module", DECISIONS)
def test_decision_modules_import_no_io_even_indirectly(module: str) -> None:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py") if "/v1/" not in f"/{p.relative_to(ROOT)}"}
    seen: set[str] = set()
    todo = [_module_name(ROOT / module)]
    bad = []
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        for imported in imports_of(paths[mod]):
            if imported.split(".")[0] in IMPURE:
                bad.append(f"{mod}: {imported}")
        todo.extend(_runtime_imports(paths[mod], set(paths)))
    assert bad == []
