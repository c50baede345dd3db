"""Structural figures of the library (issue 33), printed as JSON.

    python benchmarks/architecture.py [--root .] [--mypy]

* ``cycles``: strongly connected groups of privfair modules in the import graph, counting
  imports inside functions too (import-linter sees those, but a layer contract only forbids
  cross-layer ones); ``if TYPE_CHECKING:`` imports are left out (no runtime edge);
* ``imports_in_functions``: ``import`` statements not at a module's top level, by module;
* ``any``: how often ``Any`` is named in annotations and code;
* ``mypy_errors`` (with ``--mypy``, if mypy is installed): errors under the project's
  ``[tool.mypy]`` settings (pyproject.toml: strict for core, store and release).

Everything is read from the source with ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

PACKAGES = ("privfair", "tasks", "flows")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module an ``from … import`` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports(root: Path, path: Path, known: set[str]) -> tuple[set[str], int]:
    """The known modules ``path`` imports, and how many import statements sit in functions."""
    module = module_name(root, path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    nested = 0
    top = set(map(id, tree.body))
    # `if TYPE_CHECKING:` imports are annotations only: no runtime edge, so no cycle.
    typing_only = {id(child) for statement in tree.body
                   if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test)
                   for child in ast.walk(statement)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve(module, node, path.name == "__init__.py")
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        in_function = id(node) not in top and not _guarded_top(tree, node)
        nested += in_function
        for name in names:
            # the longest known prefix: `from a.b import c` may name module a.b.c or a.b
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found, nested


def _guarded_top(tree: ast.Module, node: ast.AST) -> bool:
    """An import in a top-level ``if``/``try`` (TYPE_CHECKING, optional deps) is not nested."""
    for statement in tree.body:
        if isinstance(statement, ast.If | ast.Try) and any(
                child is node for child in ast.walk(statement)):
            return True
    return False


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; the groups of more than one module (or a self loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
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

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def figures(root: Path, *, run_mypy: bool) -> dict[str, object]:
    files = [p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]
    known = {module_name(root, p) for p in files}
    graph: dict[str, set[str]] = {}
    nested: dict[str, int] = {}
    any_count = 0
    for path in files:
        module = module_name(root, path)
        graph[module], count = imports(root, path, known)
        if count:
            nested[module] = count
        any_count += len(re.findall(r"\bAny\b", path.read_text(encoding="utf-8")))
    library = {m: {d for d in deps if d.startswith("privfair")}
               for m, deps in graph.items() if m.startswith("privfair")}
    cycles = strongly_connected(library)
    out: dict[str, object] = {
        "modules": len(known),
        "cycles": len(cycles),
        "modules_in_cycles": sum(len(c) for c in cycles),
        "cycle_groups": cycles,
        "imports_in_functions": sum(nested.values()),
        "imports_in_functions_by_module": dict(sorted(nested.items())),
        "any": any_count,
    }
    if run_mypy:
        result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary",
                                 *PACKAGES], capture_output=True, text=True, cwd=root)
        if "No module named mypy" in result.stderr:
            out["mypy_errors"] = None
        else:
            out["mypy_errors"] = sum(": error:" in line for line in result.stdout.splitlines())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--mypy", action="store_true", help="also count mypy's errors")
    args = parser.parse_args()
    print(json.dumps(figures(Path(args.root), run_mypy=args.mypy), indent=2))


if __name__ == "__main__":
    main()
