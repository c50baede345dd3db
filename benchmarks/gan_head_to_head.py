"""Head to head on one budget: the DP GANs against the table methods on Adult (issue 12).

Every method targets the same protected attribute S = sex (the GANs' S): the benchmark uses
the packaged Adult contract with ``roles.protected = [sex]`` (race and native-country become
free columns) and a ``tot:`` block moving hours-per-week and income, so ``aim-fair+tot`` is
fair AIM followed by TOT at η = 0.05. Each (method, ε, seed) trains on the same 80 % split in
a fresh process (its peak RSS is its own) and is scored on it and on the held-out 20 % by
``privfair.evaluation.evaluate_cell``: 1/2/3-way TVD, TSTR accuracy of a logistic
regression, RD(D) of the synthetic table, and the classifier's conditional disparities
(CDP/CTPRB/CTNRB) on the real test rows. NOT privacy-protected (it scores on real data).

    .venv/bin/python benchmarks/gan_head_to_head.py --epsilons 1 10 --seeds 3 --jobs 2 \
        --out benchmarks/results/gan_head_to_head.json

``--jobs 2`` runs two cells at a time, each process limited to one thread (torch, BLAS), so on
the 2-core machine every cell has a core; cells already in ``<out>.cells.jsonl`` are kept
and skipped (an interrupted run resumes).

Writes a trade-off plot (HTML, PNG inside) beside ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, emit, run_worker

METHODS = ("dpgan", "fairgan", "fairgan-plus", "cfgan", "prefair-greedy", "aim-fair+tot")
TOT_ETA = 0.05
KEYS = ("tvd1", "tvd2", "tvd3", "logistic_accuracy", "logistic_baseline_accuracy",
        "data_sex_COD", "data_sex_conditional_COD", "logistic_sex_DP", "logistic_sex_CDP", "logistic_sex_CTPRB",
        "logistic_sex_CTNRB", "fit_s", "peak_rss_mb")


def sex_contract(folder: Path) -> Path:
    """The packaged Adult contract with S = sex as the only protected column, plus TOT."""
    import yaml

    raw = yaml.safe_load((ROOT / "data_contracts" / "adult.yaml").read_text())
    roles = raw["roles"]
    roles["free"] = [*roles["free"], *[c for c in roles["protected"] if c != "sex"]]
    roles["protected"] = ["sex"]
    raw["name"] = "adult_sex"
    raw["tot"] = {"features": ["hours-per-week"], "discrimination": "additive",
                  "distortion": {"combine": "max", "thresholds": [0.99, 1.99, 2.99],
                                 "bounds": [0.1, 0.05, 0.0],
                                 "columns": {"hours-per-week": {"ordinal": [0, 1, 2]},
                                             "income": {"changes": {">50K": {"<=50K": 1}}}}}}
    path = folder / "adult_sex.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def worker(contract: str, method: str, epsilon: float, seed: int) -> dict:
    from dataclasses import replace

    from privfair.contracts.schema import load_contract
    from privfair.contracts.tot_settings import tot_setting
    from privfair.evaluation.evaluate import evaluate_cell, load_embedded

    sex = load_contract(contract)
    data = replace(load_embedded("adult"), name="adult_sex", roles=sex.roles(),
                   privileged={"sex": sex.labels("sex").index("Male")},
                   tot=tot_setting(sex))
    base, eta = (method.removesuffix("+tot"), TOT_ETA) if method.endswith("+tot") else \
        (method, None)
    start = time.process_time()
    record = evaluate_cell(data, method=base, epsilon=epsilon, seed=seed, eta=eta,
                           classifiers=("logistic",))
    record["fit_cpu_s"] = time.process_time() - start
    record["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {k: record.get(k) for k in (*KEYS, "fit_cpu_s", "fair_structure")}


def plot(rows: list[dict], path: Path) -> None:
    import pandas as pd

    from privfair.evaluation.evaluate import trade_off_report

    frame = pd.DataFrame([{"dataset": "adult (S = sex)", "method": r["method"],
                           "epsilon": r["epsilon"], "seed": r["seed"], "eta": None,
                           "tvd2": r["tvd2"], "logistic_accuracy": r["logistic_accuracy"],
                           "logistic_sex_DP": r["logistic_sex_DP"]}
                          for r in rows if "error" not in r])
    path.write_text(trade_off_report(frame, title="GANs vs table methods on one budget"),
                    encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", nargs=4, metavar=("CONTRACT", "METHOD", "EPS", "SEED"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--from-cells", type=Path,
                        help="summarise (and plot) the cells an interrupted run wrote")
    args = parser.parse_args()
    if args.worker:
        if os.environ.get("PRIVFAIR_TORCH_THREADS"):
            import torch

            torch.set_num_threads(int(os.environ["PRIVFAIR_TORCH_THREADS"]))
        contract, method, eps, seed = args.worker
        print(json.dumps(worker(contract, method, float(eps), int(seed)), default=float))
        return
    rows = []
    if args.from_cells:
        rows = [json.loads(line) for line in args.from_cells.read_text().splitlines()]
        args.epsilons = sorted({r["epsilon"] for r in rows})
        args.methods = list(dict.fromkeys(r["method"] for r in rows))
    cells_path = args.out.with_suffix(".cells.jsonl") if args.out else None
    done = set()
    if cells_path and cells_path.exists() and not args.from_cells:
        rows = [json.loads(line) for line in cells_path.read_text().splitlines() if line]
        rows = [r for r in rows if "error" not in r]
        done = {(r["method"], r["epsilon"], r["seed"]) for r in rows}
    # The slowest cells first, so that the two job slots finish together.
    todo = sorted(((m, e, s) for e in ([] if args.from_cells else args.epsilons)
                   for m in args.methods for s in range(args.seeds)
                   if (m, e, s) not in done),
                  key=lambda cell: (not cell[0].startswith("aim"), -cell[1]))
    lock = threading.Lock()
    env = ({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PRIVFAIR_TORCH_THREADS": "1"}
           if args.jobs > 1 else {})

    with tempfile.TemporaryDirectory() as tmp:
        contract = sex_contract(Path(tmp))

        def run(cell: tuple[str, float, int]) -> None:
            method, epsilon, seed = cell
            record = run_worker(__file__, contract, method, epsilon, seed, env=env)
            record.update(method=method, epsilon=epsilon, seed=seed,
                          load1=os.getloadavg()[0], jobs=args.jobs)
            with lock:
                if cells_path:  # cell by cell: --from-cells summarises an interrupted run
                    with cells_path.open("a") as cells:
                        cells.write(json.dumps(record, default=float) + "\n")
                print(f"{method} eps={epsilon} seed={seed}: "
                      f"{record.get('error') or round(record['fit_s'], 1)} s",
                      file=sys.stderr, flush=True)
                rows.append(record)

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(run, todo))
    summary = []
    for epsilon in args.epsilons:
        for method in args.methods:
            ok = [r for r in rows if r["method"] == method and r["epsilon"] == epsilon
                  and "error" not in r]
            if not ok:
                continue
            entry = {"method": method, "epsilon": epsilon, "runs": len(ok)}
            for key in KEYS:
                values = [r[key] for r in ok if r.get(key) is not None]
                if values:
                    entry[key] = statistics.fmean(values)
                    if len(values) > 1:
                        entry[f"{key}_sd"] = statistics.stdev(values)
            summary.append(entry)
    if args.out:
        plot(rows, args.out.with_suffix(".html"))
    emit({"benchmark": "gan_head_to_head", "delta": 1e-9, "protected": "sex",
          "tot_eta": TOT_ETA, "load_avg": list(os.getloadavg()), "summary": summary,
          "runs": rows}, args.out)


if __name__ == "__main__":
    main()
