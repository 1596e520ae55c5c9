"""The modules of ``activity`` import one another in one direction only.

A cycle hidden behind an import inside a function works until someone moves the import, and
hides which module is the lower layer. These tests read the source, so imports under
``TYPE_CHECKING`` count too.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The one import inside a function: ``activity.RedisPool`` is loaded on first use, so that
#: importing the domain types (the gateway runtime does) never imports a Redis client.
LAZY_IMPORTS = {("activity", "__getattr__", "activity.redis")}


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted((ROOT / "activity").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = ast.parse(path.read_text(), str(path))
    return out


def _imported(node: ast.Import | ast.ImportFrom, known: dict[str, ast.Module]) -> set[str]:
    """The activity modules an import statement names (a submodule when it names one)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    base = node.module or ""
    submodules = {f"{base}.{alias.name}" for alias in node.names} & known.keys()
    return submodules or ({base} & known.keys())


def _function_imports(tree: ast.Module) -> list[tuple[str, ast.Import | ast.ImportFrom]]:
    found = []
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found.append((function.name, node))
    return found


def test_no_import_inside_a_function_but_the_lazy_redis_pool() -> None:
    modules = _modules()
    found = {
        (name, function, target)
        for name, tree in modules.items()
        for function, node in _function_imports(tree)
        for target in _imported(node, modules)
    }
    assert found == LAZY_IMPORTS


def test_imports_have_no_cycle_even_through_a_function() -> None:
    modules = _modules()
    graph = {
        name: {
            target
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in _imported(node, modules)
            if target != name
        }
        for name, tree in modules.items()
    }
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle
