"""Private arrays have one writer, which creates each file 0600 (issue 33.3)."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from privfair.store.files import save_private_array

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def permissive_umask():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_private_array_is_created_0600_with_no_chmod(tmp_path, monkeypatch,
                                                       permissive_umask):
    """Under umask 0, over a world-readable file of the same name, and with chmod refused:
    the mode can only come from the file's creation."""
    stale = tmp_path / "rows.npy"
    stale.write_bytes(b"an earlier, world-readable file")
    stale.chmod(0o644)

    def no_chmod(*args, **kwargs):
        raise AssertionError("a private file was chmod-ed after its creation")

    monkeypatch.setattr(os, "chmod", no_chmod)
    monkeypatch.setattr(os, "fchmod", no_chmod)
    rows = np.arange(12, dtype=np.int64).reshape(4, 3)[:, ::2]  # not contiguous
    ref = save_private_array(rows, folder=tmp_path, name="rows.npy")
    assert stat.S_IMODE(stale.stat().st_mode) == 0o600
    assert Path(ref.path) == stale.resolve()
    np.testing.assert_array_equal(np.load(ref.open_checked(), allow_pickle=False), rows)


def test_private_arrays_have_one_writer():
    """No module but store/files.py calls ``np.save`` (a second writer of private arrays
    would bring back a file readable before its chmod)."""
    writers = []
    for path in sorted((ROOT / "privfair").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "save" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in ("np", "numpy")):
                writers.append(str(path.relative_to(ROOT)))
    assert writers == ["privfair/store/files.py"]
