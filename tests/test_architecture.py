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
