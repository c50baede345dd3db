"""The docs site (issue 44.5): the tutorials run to the end, and the site builds with no warning.

Each tutorial under ``docs/tutorials/`` is a script a reader follows: its ```` ```python ````
blocks run, in order, in one namespace, in a temporary folder (blocks fenced ```` ```py ````
show edits to repository files and are not run). ``mkdocs build --strict`` then builds the
whole site into a temporary folder, so a broken link or anchor, a page left out of the nav,
an include that moved or a docstring griffe cannot read fails here, and so does a build
that imports Prefect or the library (griffe reads the source); it is skipped (saying
why) only where mkdocs is not installed (the ``docs`` and ``dev`` extras install it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))
#: A fenced block: its info string (language) and its body.
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


#: ``mkdocs`` run with the project's packages unimportable: the API reference is read
#: statically (griffe), so building the site never imports Prefect (nor the library).
NO_IMPORT_BUILD = """
import sys

class NoProjectImports:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("prefect", "privfair", "tasks", "flows"):
            raise ImportError(f"building the docs imported {name}")
        return None

sys.meta_path.insert(0, NoProjectImports())
from mkdocs.__main__ import cli
sys.argv[0] = "mkdocs"
cli()
"""


def runnable_blocks(markdown: str) -> list[str]:
    """The tutorial's ```` ```python ```` blocks, in order (not ```` ```py ```` ones)."""
    return [body for info, body in FENCE.findall(markdown) if info.strip() == "python"]


def test_fence_reader_keeps_only_python_blocks() -> None:
    text = ("intro\n```python\na = 1\n```\n\n```py\nnot run\n```\n"
            "```bash\nmake test\n```\n```python\nb = a + 1\n```\n")
    assert runnable_blocks(text) == ["a = 1\n", "b = a + 1\n"]


def test_both_tutorials_exist_and_run_code() -> None:
    names = {path.stem for path in TUTORIALS}
    assert {"add-a-release-kind", "add-a-table-method"} <= names
    for path in TUTORIALS:
        assert len(runnable_blocks(path.read_text(encoding="utf-8"))) >= 3, path.name


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_to_the_end(tutorial: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The tutorials set these themselves; monkeypatch restores the suite's after the test.
    for name in ("PRIVFAIR_REGISTRY", "PRIVFAIR_STATE_HOME"):
        monkeypatch.setenv(name, os.environ.get(name, str(tmp_path / name.lower())))
    monkeypatch.chdir(tmp_path)
    # One module, as a reader's session or script would be (dataclasses and pydantic look
    # their class's module up in sys.modules).
    module = types.ModuleType(f"tutorial_{tutorial.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for number, block in enumerate(runnable_blocks(tutorial.read_text(encoding="utf-8")), 1):
        code = compile(block, f"{tutorial.name}, python block {number}", "exec")
        exec(code, module.__dict__)  # noqa: S102 - the tutorial is the test


def test_site_builds_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec(
            "mkdocstrings_handlers") is None:
        pytest.skip("mkdocs or mkdocstrings is not installed "
                    "(pip install -e '.[docs]'): the site is not built")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-c", NO_IMPORT_BUILD, "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "tutorials" / "add-a-release-kind" / "index.html").is_file()
    reference = (tmp_path / "site" / "reference" / "mechanisms" / "index.html").read_text(
        encoding="utf-8")
    assert "gaussian_mechanism" in reference  # the API reference rendered the docstrings


def load_hooks() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts/docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hooks_rewrite_readme_links_and_sphinx_roles() -> None:
    hooks = load_hooks()
    moved = ("![plot](docs/tradeoff_adult.png) [`benchmarks/a.html`](benchmarks/a.html) "
             "[PreFair](benchmarks/r/report.html#prefair) [guide](guide/budgets.md)")
    assert hooks.root_links(moved, 0) == (
        "![plot](tradeoff_adult.png) `benchmarks/a.html` "
        "PreFair (`benchmarks/r/report.html#prefair`) [guide](guide/budgets.md)")
    assert hooks.root_links("![p](docs/x.png)", 2) == "![p](../../x.png)"
    assert hooks.plain_roles("see :func:<code>~privfair.core.mechanisms.gaussian_mechanism"
                             "</code> and :class:<code>Budget</code>") == (
        "see <code>gaussian_mechanism</code> and <code>Budget</code>")
