"""Every table of the four papers re-run side by side with the paper's numbers.

``python -m benchmarks.reproduce --quick | --full [--only SECTION ...] [--out DIR]`` (or
``python benchmarks/reproduce ...`` where opacus's own top-level ``benchmarks`` package
shadows this folder). Cells are appended to ``results.jsonl`` as they finish (an interrupted
run resumes), then ``report.html`` and ``report.json`` are written. Paper numbers are in
``paper_tables/`` (one file per table, each row with its source). Evaluation output: it
reads the real embedded data and is not privacy-protected.
"""
