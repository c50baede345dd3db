"""Entry point: ``python -m benchmarks.reproduce`` or ``python benchmarks/reproduce``."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a folder: opacus installs a top-level ``benchmarks`` package that shadows
    # ours, so import this folder as the package ``reproduce``.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reproduce.cli import main
else:
    from .cli import main

# Guarded: the process pool's workers import this module as ``__mp_main__``.
if __name__ == "__main__":
    sys.exit(main())
