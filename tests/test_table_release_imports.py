"""A table release imports neither networkx nor SciPy.

Both cost a fresh process ~0.2 s of imports (SciPy's sparse module drags in numpy.f2py), a
tenth of a 300k-row release; the table path needs neither (its graph work is a few small
searches, its QP matrix a CSC triple that Clarabel reads directly). The release runs in a
fresh interpreter so that no other test's imports are counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys
from privfair.release.run import release_table

out = sys.argv[1]
release_table({"contract": "adult", "epsilon": 1.0, "delta": 1e-9, "method": sys.argv[2],
               "seed": 7, "insecure_seed": True, "out": out + "/releases",
               "work_dir": out + "/work"})
print(sorted(m for m in ("networkx", "scipy") if m in sys.modules))
"""


@pytest.mark.parametrize("method", ["mst", "prefair-greedy"])
def test_table_release_imports_neither_networkx_nor_scipy(method, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PRIVFAIR_REGISTRY": str(tmp_path / "reg")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), method], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
