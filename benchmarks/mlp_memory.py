"""Peak memory and time of the downstream MLP on Adult-sized data (one fresh process).

    python benchmarks/mlp_memory.py [--rows-multiplier 1]

Prints JSON: RSS before training (data, libraries and torch loaded), peak RSS after training,
their difference, and the training time. The model trains on synthetic-sized data (the real
training split stands in for it; only the shape matters here).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from _common import load_codes


def _rss_mb() -> float:
    # Current RSS from /proc (Linux); ru_maxrss below is the peak.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-multiplier", type=int, default=1)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd
    import torch  # noqa: F401  (loaded before the baseline so it is not counted as training)

    from privfair.evaluation.classifiers import train_and_predict
    from privfair.evaluation.evaluate import train_test_split

    codes, contract = load_codes("adult")
    train, test = train_test_split(codes, rng=np.random.default_rng(0))
    train = pd.concat([train] * args.rows_multiplier, ignore_index=True)
    before = _rss_mb()
    start = time.perf_counter()
    train_and_predict("mlp", train, test, contract.domain(), outcome="income", seed=0)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"benchmark": "mlp_memory", "train_rows": len(train),
                      "rss_before_mb": before, "peak_rss_mb": peak,
                      "training_peak_increase_mb": peak - before, "train_s": seconds}))


if __name__ == "__main__":
    main()
