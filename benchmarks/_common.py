"""Helpers shared by the benchmark scripts (not part of the library)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_codes(name: str):
    """An embedded dataset discretised by its packaged contract: (codes, contract)."""
    from privfair.contracts.datasets import load_codes as load

    return load(name)


def run_worker(script: str, *args: object, env: dict[str, str] | None = None) -> dict:
    """Run ``script --worker args`` in a fresh process (so its peak RSS is its own);
    ``env`` adds to the environment (e.g. thread limits)."""
    result = subprocess.run([sys.executable, script, "--worker", *map(str, args)],
                            capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no output"]
        return {"error": lines[-1]}
    return json.loads(result.stdout)


def emit(document: dict, out: Path | None) -> None:
    """Print the JSON document, and write it to ``out`` when given."""
    text = json.dumps(document, indent=2, default=float)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(text)
