"""privfair against today's peers, side by side in one run (issue 43; prints JSON).

The peers, each in a venv of its own (their pins conflict with each other and with the
project's; never project dependencies), created on first use:

* ``.bench-venv-dpmm``: SAS's dpmm 0.1.9 (``benchmarks/peers/requirements-dpmm.txt``), MST and
  AIM pipelines with their table binner disabled (``disable_processing=True``) and
  ``compress=False``: they get the declared domain, so no budget goes to DP preprocessing and
  rare codes are not merged from the data; ``n_jobs=1``.
* ``.bench-venv-opendp``: OpenDP 0.16 with its ``mbi`` extra (mbi 1.1,
  ``requirements-opendp.txt``): ``contingency_table(keys=..., algorithm=dp.mbi.MST() | AIM())``
  under zCDP with every key given (OpenDP then refuses a δ: it runs at the ρ that privfair's
  ledger charges for (ε, δ)); a privacy unit of one row. OpenDP adds a null key to every
  column, so its model's domain has one more code per column; synthetic rows holding a null
  are dropped before scoring and their share reported (``null_row_share``). OpenDP draws its
  noise from OS entropy: its seeds are repeats, not settable.

Every method gets the same integer codes and the contract's declared domain (no
data-dependent preprocessing). Budget splits are each method's own: privfair's and dpmm's
MST follow the MST paper's thirds of ρ (one-way marginals, selection, the tree's cliques);
OpenDP gives half of ρ to the one-way marginals by default (``oneway_split``) and its MST
measures the tree with ``measure_split=0.9`` of the rest; each AIM plans its rounds from its
own remaining budget.

Samplers are compared like for like: ``round`` (mbi's ``synthetic_data`` dealing counts
deterministically; privfair's ``mode="round"``; dpmm's only sampler) in every run, and
``sample`` (iid draws) for privfair and OpenDP with ``--iid`` (dpmm exposes no iid sampler).

Each fit runs in a child process, so its wall time, CPU time (``time.process_time``, the
child's user + system) and peak RSS are its own. Scores: mean 2-way and 3-way TVD of the
synthetic table against the input over the declared cells
(``privfair.evaluation.utility.marginal_tvd``), the same function for every method. Per
(dataset, ε, method) the JSON gives each side's mean ± standard error over seeds, and the
ratios peer / privfair of wall time, CPU time and peak memory.

    python benchmarks/peers_side_by_side.py --out benchmarks/results/peers_side_by_side.json
    python benchmarks/peers_side_by_side.py --datasets compas --epsilons 1 --seeds 3  # a look
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = {"dpmm": ROOT / ".bench-venv-dpmm", "opendp": ROOT / ".bench-venv-opendp"}
REQUIREMENTS = {name: ROOT / "benchmarks" / "peers" / f"requirements-{name}.txt"
                for name in PEERS}
IMPORTS = {"dpmm": "import dpmm.pipelines", "opendp": "import opendp.extras.mbi, mbi"}


def _usage() -> dict:
    return {"cpu_s": time.process_time(),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# --- workers: each runs in its own venv (stdlib, numpy, pandas and the package only) ----------

def dpmm_worker(method: str, data: str, domain: dict, out: str, epsilon: float, delta: float,
                seed: int, sampler: str) -> dict:
    import pandas as pd
    from dpmm.pipelines import AIMPipeline, MSTPipeline

    codes = pd.read_csv(data)
    pipeline = {"mst": MSTPipeline, "aim": AIMPipeline}[method](
        epsilon=epsilon, delta=delta, disable_processing=True, compress=False, n_jobs=1)
    start = time.perf_counter()
    pipeline.fit(codes, domain=domain, random_state=seed)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    synthetic = pipeline.generate(n_records=len(codes), random_state=seed + 1)
    sample_s = time.perf_counter() - start
    synthetic[list(codes.columns)].astype("int64").to_csv(out, index=False)
    return {"fit_s": fit_s, "sample_s": sample_s, **_usage()}


def opendp_worker(method: str, data: str, domain: dict, out: str, rho: float, seed: int,
                  sampler: str) -> dict:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    frame = pl.read_csv(data).with_columns(pl.all().cast(pl.Int64))
    start = time.perf_counter()
    context = dp.Context.compositor(data=frame.lazy(),
                                    privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(rho=rho))
    algorithm = {"mst": dp.mbi.MST, "aim": dp.mbi.AIM}[method]()
    table = (context.query(rho=rho)
             .contingency_table(keys={c: list(range(n)) for c, n in domain.items()},
                                algorithm=algorithm)
             .release())
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    synthetic = table.synthesize(rows=frame.height, method=sampler)
    sample_s = time.perf_counter() - start
    synthetic = synthetic.select(list(domain))
    # OpenDP's keys carry a null for every column, and its model gives it a little mass:
    # rows holding one are dropped (the share is reported), the rest scored as they are.
    complete = synthetic.drop_nulls()
    complete.to_pandas().astype("int64").to_csv(out, index=False)
    return {"fit_s": fit_s, "sample_s": sample_s, **_usage(),
            "null_row_share": 1 - complete.height / max(synthetic.height, 1)}


def privfair_worker(method: str, dataset: str, out: str, epsilon: float, delta: float,
                    seed: int, sampler: str) -> dict:
    import numpy as np
    from _common import load_codes

    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = load_codes(dataset)
    fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
    synth = FairSynthesizer(domain=contract.domain(), roles=contract.roles(), epsilon=epsilon,
                            delta=delta, method=method, require_fair=False)
    start = time.perf_counter()
    synth.fit(codes, rng=fit_rng)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    synthetic = synth.sample(len(codes), rng=sample_rng, mode=sampler)
    sample_s = time.perf_counter() - start
    synthetic[list(codes.columns)].astype("int64").to_csv(out, index=False)
    return {"fit_s": fit_s, "sample_s": sample_s, **_usage()}


# --- driver (project venv) -----------------------------------------------------------------

def ensure_venv(name: str) -> Path:
    """The peer's python, creating its venv from its requirements file on first use."""
    python = PEERS[name] / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", IMPORTS[name]],
                                          capture_output=True).returncode == 0:
        return python
    print(f"creating {PEERS[name]} ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(PEERS[name])], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS[name])],
                   check=True)
    return python


#: One thread per fit: the wall and CPU figures are a single core's, for every method.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "POLARS_MAX_THREADS": "1"}


def child(python: str, args: list[str], timeout: float) -> dict:
    """This script's worker in a child process (``peer_speed.child``, one thread)."""
    from peer_speed import child as run_child

    return run_child(python, args, timeout, script=__file__, env=ONE_THREAD)


def _mean_se(values: list[float]) -> dict:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return {"mean": None, "se": None, "n": 0}
    mean = sum(finite) / len(finite)
    if len(finite) < 2:
        return {"mean": mean, "se": None, "n": 1}
    var = sum((v - mean) ** 2 for v in finite) / (len(finite) - 1)
    return {"mean": mean, "se": math.sqrt(var / len(finite)), "n": len(finite)}


def _ratio(peer: dict, ours: dict) -> float | None:
    if peer["mean"] and ours["mean"]:
        return round(peer["mean"] / ours["mean"], 2)
    return None


def run(args: argparse.Namespace) -> dict:
    import pandas as pd
    from _common import load_codes

    from privfair.core.accounting import zcdp_rho
    from privfair.evaluation.utility import marginal_tvd

    pythons = {name: str(ensure_venv(name)) for name in args.peers}
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    samplers = ("round", "sample") if args.iid else ("round",)
    rows = []
    for dataset in args.datasets:
        codes, contract = load_codes(dataset)
        domain = contract.domain().to_dict()
        data = work / f"{dataset}.csv"
        codes.to_csv(data, index=False)
        (work / f"{dataset}.domain.json").write_text(json.dumps(domain))
        for epsilon in args.epsilons:
            rho = zcdp_rho(epsilon=epsilon, delta=args.delta)
            for method in args.methods:
                for sampler in samplers:
                    # dpmm exposes no iid sampler
                    runs: dict[str, list[dict]] = {"privfair": [], **{
                        p: [] for p in args.peers if not (p == "dpmm" and sampler == "sample")}}
                    for seed in range(args.seeds):
                        for who in runs:
                            out = work / f"{dataset}-{epsilon}-{method}-{who}-{seed}.csv"
                            common = ["--method", method, "--out", str(out), "--seed", str(seed),
                                      "--sampler", sampler]
                            if who == "privfair":
                                result = child(sys.executable, ["--worker", who, *common,
                                                                "--dataset", dataset, "--eps",
                                                                str(epsilon), "--delta",
                                                                str(args.delta)], args.timeout)
                            else:
                                result = child(pythons[who], [
                                    "--worker", who, *common, "--data", str(data),
                                    "--domain", str(work / f"{dataset}.domain.json"),
                                    "--eps", str(epsilon), "--delta", str(args.delta),
                                    "--rho", repr(rho)], args.timeout)
                            if out.exists() and "error" not in result:
                                synthetic = pd.read_csv(out)
                                result["tvd2"] = marginal_tvd(codes, synthetic, domain, 2)
                                result["tvd3"] = marginal_tvd(codes, synthetic, domain, 3)
                                out.unlink()
                            runs[who].append(result)
                            print(json.dumps({"dataset": dataset, "epsilon": epsilon,
                                              "method": method, "sampler": sampler,
                                              "who": who, "seed": seed, **result}),
                                  file=sys.stderr, flush=True)
                    row = {"dataset": dataset, "rows": len(codes), "epsilon": epsilon,
                           "delta": args.delta, "rho": rho, "method": method,
                           "sampler": sampler, "seeds": args.seeds}
                    for who, results in runs.items():
                        row[who] = {key: _mean_se([r.get(key) for r in results])
                                    for key in ("tvd2", "tvd3", "wall_s", "fit_s", "cpu_s",
                                                "peak_rss_mb")}
                        row[who]["errors"] = [r["error"] for r in results if "error" in r]
                    for who in runs:
                        if who == "privfair":
                            continue
                        row[f"{who}_over_privfair"] = {
                            key: _ratio(row[who][key], row["privfair"][key])
                            for key in ("tvd2", "tvd3", "fit_s", "wall_s", "cpu_s",
                                        "peak_rss_mb")}
                    rows.append(row)
    return {"benchmark": "peers_side_by_side", "cpu_count": os.cpu_count(),
            "load_avg": os.getloadavg(), "peers": {
                "dpmm": "dpmm 0.1.9 (numpy 1.26, pandas 2.1, opendp 0.12)",
                "opendp": "opendp 0.16.0 with mbi 1.1.0 (jax)"},
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=("privfair", "dpmm", "opendp"))
    parser.add_argument("--method", choices=("mst", "aim"))
    parser.add_argument("--data")
    parser.add_argument("--domain")
    parser.add_argument("--dataset")
    parser.add_argument("--out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampler", choices=("round", "sample"), default="round")
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--rho", type=float)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--datasets", nargs="+", default=["compas", "adult"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=["mst", "aim"])
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=list(PEERS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--iid", action="store_true", help="also compare iid samplers")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--work", default="/tmp/privfair-peers")
    parser.add_argument("--out-json", dest="out_json", type=Path)
    args = parser.parse_args(argv)
    if args.worker:
        if args.worker == "privfair":
            sys.path.insert(0, str(ROOT / "benchmarks"))
            result = privfair_worker(args.method, args.dataset, args.out, args.eps, args.delta,
                                     args.seed, args.sampler)
        elif args.worker == "dpmm":
            result = dpmm_worker(args.method, args.data, json.loads(Path(args.domain).read_text()),
                                 args.out, args.eps, args.delta, args.seed, args.sampler)
        else:
            result = opendp_worker(args.method, args.data,
                                   json.loads(Path(args.domain).read_text()), args.out,
                                   args.rho, args.seed, args.sampler)
        print(json.dumps(result))
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _common import emit

    emit(run(args), args.out_json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
