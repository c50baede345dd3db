"""Structural figures of the library (issue 33), printed as JSON.

    python benchmarks/architecture.py [--root .] [--mypy]

* ``cycles``: strongly connected groups of privfair modules in the import graph, counting
  imports inside functions too (import-linter sees those, but a layer contract only forbids
  cross-layer ones); ``if TYPE_CHECKING:`` imports are left out (no runtime edge);
* ``imports_in_functions``: ``import`` statements not at a module's top level, by module;
* ``imports_in_functions_defer``: each of those, with the heavy dependencies it defers
  (:data:`HEAVY`, directly or through what the imported module loads at its top level);
* ``light_imports_in_functions``: those that defer none (``tests/test_architecture.py``
  keeps it empty);
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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

PACKAGES = ("privfair", "tasks", "flows")
#: Third-party packages worth deferring: each takes >= 50 ms to import on the 2-core machine
#: (`python -c "import X"` less the interpreter's start, 2026-11-28), or is an optional
#: extra (torch, opacus, causal-learn, the Dask and Prefect stacks).
HEAVY = frozenset({
    "numpy", "pandas", "pyarrow", "duckdb", "sqlalchemy", "psycopg", "scipy", "sklearn", "networkx",
    "cvxpy", "highspy", "matplotlib", "dp_accounting", "great_expectations", "torch", "opacus",
    "causallearn", "dask", "distributed", "prefect", "prefect_dask"})


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


class ModuleImports(NamedTuple):
    """What one module imports: at its top level (run when it is imported) and inside
    functions (run when the function is called), each as the dotted names it names."""

    top: frozenset[str]
    nested: tuple[tuple[int, tuple[str, ...]], ...]  # (line, names) per statement


def read_imports(root: Path, path: Path) -> ModuleImports:
    """The imports of ``path``; ``if TYPE_CHECKING:`` imports are left out (no runtime
    edge), and those in a top-level ``if``/``try`` (optional dependencies) count as top."""
    module = module_name(root, path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set(map(id, tree.body))
    typing_only = {id(child) for statement in tree.body
                   if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test)
                   for child in ast.walk(statement)}
    at_top: set[str] = set()
    nested: list[tuple[int, tuple[str, ...]]] = []
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
        if id(node) in top or _guarded_top(tree, node):
            at_top.update(names)
        else:
            nested.append((node.lineno, tuple(names)))
    return ModuleImports(frozenset(at_top), tuple(sorted(nested)))


def known_prefix(name: str, known: set[str]) -> str:
    """The longest known module ``name`` starts with (``from a.b import c`` may name module
    a.b.c or a.b), or ''."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def imports(root: Path, path: Path, known: set[str]) -> tuple[set[str], int]:
    """The known modules ``path`` imports, and how many import statements sit in functions."""
    module = module_name(root, path)
    read = read_imports(root, path)
    names = set(read.top).union(*(set(n) for _, n in read.nested))
    found = {known_prefix(name, known) for name in names} - {"", module}
    return found, len(read.nested)


def heavy_closure(tables: dict[str, ModuleImports]) -> Callable[[str], set[str]]:
    """``closure(name)``: the heavy third-party packages (:data:`HEAVY`) that importing
    ``name`` loads, through the top-level imports of it and of its parent packages."""
    known = set(tables)
    memo: dict[str, set[str]] = {}

    def module_heavy(module: str) -> set[str]:
        if module not in memo:
            memo[module] = set()  # a cycle through top-level imports adds nothing new
            memo[module] = set().union(*(closure(name) for name in tables[module].top))
        return memo[module]

    def closure(name: str) -> set[str]:
        if name.split(".")[0] in HEAVY:
            return {name.split(".")[0]}
        module = known_prefix(name, known)
        parts = module.split(".") if module else []
        return set().union(*(module_heavy(".".join(parts[:i + 1])) for i in range(len(parts))))

    return closure


#: Modules that import only the standard library at their top, and why: for them any other
#: import is worth deferring.
STANDARD_LIBRARY_ONLY = {
    "privfair.cli": "`privfair release` starts the temporary Prefect API server before numpy, "
                    "pandas, pydantic and Prefect load (issue 15; "
                    "tests/test_prefect_startup.py)",
}


def deferred_imports(root: Path) -> dict[str, list[str]]:
    """Why each import inside a function is there: ``{"module:line name": [what it defers]}``,
    the heavy packages (:data:`HEAVY`) that importing it loads, or, in a module of
    :data:`STANDARD_LIBRARY_ONLY`, the package itself; an empty list defers nothing."""
    files = [p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]
    tables = {module_name(root, p): read_imports(root, p) for p in files}
    closure = heavy_closure(tables)

    def deferred(module: str, name: str) -> set[str]:
        top = name.split(".")[0]
        if module in STANDARD_LIBRARY_ONLY and top not in sys.stdlib_module_names:
            return {top}
        return closure(name)

    return {f"{module}:{line} {names[0]}":
            sorted(set().union(*(deferred(module, name) for name in names)))
            for module, table in sorted(tables.items()) for line, names in table.nested}


def light_imports_in_functions(root: Path) -> list[str]:
    """Imports inside functions that defer no heavy dependency (``module:line name``): they
    could sit at the top of their module (issue 33: lazy only for heavy dependencies)."""
    return [where for where, why in deferred_imports(root).items() if not why]


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
        "light_imports_in_functions": light_imports_in_functions(root),
        "imports_in_functions_defer": deferred_imports(root),
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
