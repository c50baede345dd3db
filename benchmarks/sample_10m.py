"""Streamed sampling (issue 15 item 5): 10M synthetic rows to a partitioned Parquet.

Fits MST on the embedded Adult table (ε = 1, a test seed), then, in a fresh process so the
peak RSS is the sampler's own, draws ``--rows`` rows with
:func:`privfair.synth.synthesizer.stream_sample` in ``--chunk`` row parts (dictionary-encoded
labels) and prints JSON: seconds, rows/s, parts, bytes on disk, peak RSS, load average.

    python benchmarks/sample_10m.py                      # 10,000,000 rows
    python benchmarks/sample_10m.py --rows 1000000       # quick look
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import sys
import tempfile
import time
from pathlib import Path

from _common import emit, load_codes, run_worker


def adult_mst():
    """MST fitted on the embedded Adult codes (ε = 1, test seed): (synthesizer, contract)."""
    import numpy as np

    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = load_codes("adult")
    synth = FairSynthesizer(domain=contract.domain(), roles=contract.roles(), epsilon=1.0,
                            delta=1e-9, method="mst").fit(codes, rng=np.random.default_rng(0))
    return synth, contract


def adult_contract():
    """The packaged Adult contract (what the generated rows' codes follow)."""
    from privfair.contracts.datasets import contract_path
    from privfair.contracts.schema import load_contract

    return load_contract(contract_path("adult"))


def rows_arguments(doc: str, extra=None) -> argparse.Namespace:
    """``--rows`` (10M), ``--chunk`` (1M rows per part) and ``--out``; ``extra(parser)``
    adds a script's own options."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--chunk", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path)
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def fit(path: Path) -> None:
    synth, contract = adult_mst()
    labels = {a: contract.labels(a) for a in contract.column_names}
    path.write_bytes(pickle.dumps((synth.model_, synth.compression_, labels)))


def worker(model_path: str, out: str, rows: str, chunk: str) -> dict:
    import numpy as np

    from privfair.synth.synthesizer import stream_sample

    model, compression, labels = pickle.loads(Path(model_path).read_bytes())
    start = time.perf_counter()
    parts = stream_sample(model, compression, int(rows), out, rng=np.random.default_rng(1),
                          chunk_rows=int(chunk), labels=labels)
    seconds = time.perf_counter() - start
    return {"rows": int(rows), "chunk_rows": int(chunk), "seconds": round(seconds, 2),
            "rows_per_s": round(int(rows) / seconds), "parts": len(parts),
            "bytes": sum(p.stat().st_size for p in parts),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main() -> None:
    args = rows_arguments(__doc__)
    with tempfile.TemporaryDirectory(prefix="pf-sample-") as tmp:
        model = Path(tmp) / "model.pkl"
        fit(model)
        record = run_worker(__file__, model, Path(tmp) / "synthetic", args.rows, args.chunk)
    emit({"benchmark": "sample_10m", "load_avg": os.getloadavg(), "cpus": os.cpu_count(),
          **record}, args.out)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(__import__("json").dumps(worker(*sys.argv[2:6])))
    else:
        main()
