"""The library's import graph has no cycle, counting imports inside functions (issue 33)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _architecture():
    spec = importlib.util.spec_from_file_location("architecture",
                                                  ROOT / "benchmarks" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(root: Path, modules: dict[str, str]) -> Path:
    """A made-up ``privfair`` package under ``root``: module name -> source."""
    package = root / "privfair"
    package.mkdir()
    for name, source in {"__init__": "", **modules}.items():
        (package / f"{name}.py").write_text(source)
    return root


def test_no_import_cycle_among_privfair_modules():
    figures = _architecture().figures(ROOT, run_mypy=False)
    assert figures["cycles"] == 0, figures["cycle_groups"]


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    root = _package(tmp_path, {
        "a": "from privfair import b\n",
        "b": "def f():\n    from privfair.a import x\n",
        "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from privfair import a\n"})
    figures = _architecture().figures(root, run_mypy=False)
    assert figures["cycle_groups"] == [["privfair.a", "privfair.b"]]
    assert figures["imports_in_functions"] == 1


def test_imports_inside_functions_only_defer_heavy_dependencies():
    """Issue 33: an import sits inside a function only when it defers a heavy dependency
    (:data:`HEAVY`, directly or through the imported module's top level), or in a module
    that keeps to the standard library for a stated reason (the CLI)."""
    assert _architecture().light_imports_in_functions(ROOT) == []


def test_a_light_import_inside_a_function_is_found(tmp_path):
    root = _package(tmp_path, {
        "heavy": "import numpy\n",
        "light": "import json\n",
        "user": ("def f():\n    import json\n"                       # light: stdlib
                 "def g():\n    import torch\n"                      # heavy itself
                 "def h():\n    from privfair.heavy import numpy\n"  # heavy through its top
                 "def i():\n    from privfair import light\n"),      # light: stdlib-only top
        "cli": "def f():\n    import yaml\n    import json\n"})
    assert _architecture().light_imports_in_functions(root) == [
        "privfair.cli:3 json", "privfair.user:2 json", "privfair.user:8 privfair.light"]
