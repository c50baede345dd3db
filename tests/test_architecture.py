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


def test_no_import_cycle_among_privfair_modules():
    figures = _architecture().figures(ROOT, run_mypy=False)
    assert figures["cycles"] == 0, figures["cycle_groups"]


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    arch = _architecture()
    package = tmp_path / "privfair"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from privfair import b\n")
    (package / "b.py").write_text("def f():\n    from privfair.a import x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from privfair import a\n")
    figures = arch.figures(tmp_path, run_mypy=False)
    assert figures["cycle_groups"] == [["privfair.a", "privfair.b"]]
    assert figures["imports_in_functions"] == 1


def test_imports_inside_functions_only_defer_heavy_dependencies():
    """Issue 33: an import sits inside a function only when it defers a heavy dependency
    (:data:`HEAVY`, directly or through the imported module's top level), or in a module
    that keeps to the standard library for a stated reason (the CLI)."""
    assert _architecture().light_imports_in_functions(ROOT) == []


def test_a_light_import_inside_a_function_is_found(tmp_path):
    arch = _architecture()
    package = tmp_path / "privfair"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "heavy.py").write_text("import numpy\n")
    (package / "light.py").write_text("import json\n")
    (package / "user.py").write_text(
        "def f():\n    import json\n"                       # light: stdlib
        "def g():\n    import torch\n"                      # heavy itself
        "def h():\n    from privfair.heavy import numpy\n"  # heavy through its top level
        "def i():\n    from privfair import light\n")       # light: its top is stdlib only
    (package / "cli.py").write_text("def f():\n    import yaml\n    import json\n")
    assert arch.light_imports_in_functions(tmp_path) == [
        "privfair.cli:3 json", "privfair.user:2 json", "privfair.user:8 privfair.light"]
