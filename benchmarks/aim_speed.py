"""AIM's speed by phase (issue 43.3): Adult at ε = 1 and the 300k x 41 generated table.

Each (code, dataset, seed) fits ``FairSynthesizer(method="aim")`` at ε = 1, δ = 1e-9 and the
library defaults in a fresh process (so peak RSS is its own), samples n rows i.i.d. and prints
JSON per run: wall and CPU seconds, peak RSS, AIM rounds, the time of each phase (wall and
CPU), the final fit's iterations and what stopped it, and the 2- and 3-way TVD against the
real table (an evaluation: it reads the data on purpose). Phases, timed by wrapping the
functions AIM calls (no change to what they compute):

* ``counting``: the exact marginals of every candidate clique;
* ``scoring``: the model's marginals of every candidate, each round (candidate scores);
* ``selection``: the exponential mechanism with its admissibility (model-size) checks;
* ``measurement``: the Gaussian mechanism (initial one-way and each round's marginal);
* ``round_estimation``: the warm-started fit after every measurement;
* ``final_fit``: the release's fit to all measurements;
* ``sampling``: n synthetic rows; ``other``: what the fit spent outside these.

A run "converged" when the final fit stopped on its tolerance (or solved exactly) and no time
budget ended anything (the budget is an alarm only since issue 41.5, and
``max_time_s`` is left at None here).

``--baseline DIR`` also runs the code in DIR (a checkout of an earlier commit, e.g.
``git worktree add /tmp/base main``) in the same invocation, seeds interleaved, so before and
after see the same machine load. The 3-way TVD of the wide table averages 300 triples drawn
with a fixed public seed (all 10,660 would take longer than the fit).

    nice -n 10 python benchmarks/aim_speed.py --seeds 3 --baseline /tmp/base \\
        --out benchmarks/results/aim_speed.json
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from _common import emit, load_codes, run_worker

PHASES = ("counting", "scoring", "selection", "measurement", "round_estimation",
          "final_fit", "sampling")


def _table(dataset: str):
    if dataset == "adult":
        return load_codes("adult")
    if dataset == "wide41":
        from small_n import generated

        return generated(300_000, 41, 0.3)
    raise ValueError(f"dataset must be adult or wide41, got {dataset!r}")


def _tvd(real, synthetic, domain, cliques) -> float:
    import numpy as np

    values = []
    for clique in cliques:
        shape = domain.shape(clique)
        tables = []
        for frame in (real, synthetic):
            index = np.ravel_multi_index([frame[a].to_numpy() for a in clique], shape)
            counts = np.bincount(index, minlength=int(np.prod(shape)))
            tables.append(counts / counts.sum())
        values.append(0.5 * float(np.abs(tables[0] - tables[1]).sum()))
    return float(np.mean(values))


def _source() -> str:
    import privfair

    return str(Path(privfair.__file__).parent.parent)


def worker(dataset: str, seed: int) -> dict:
    import numpy as np

    import privfair.synth.aim as aim
    import privfair.synth.synthesizer as synthesizer
    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = _table(dataset)
    domain = contract.domain()
    spent = {p: [0.0, 0.0] for p in PHASES}

    def timed(function, phase):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[phase][0] += time.perf_counter() - wall
                spent[phase][1] += time.process_time() - cpu
        return wrapper

    aim.model_marginals = timed(aim.model_marginals, "scoring")
    aim.exponential_first_admissible = timed(aim.exponential_first_admissible, "selection")
    aim.gaussian_mechanism = timed(aim.gaussian_mechanism, "measurement")
    aim.measure_marginals = timed(aim.measure_marginals, "measurement")
    aim.estimate = timed(aim.estimate, "round_estimation")
    synthesizer.fit_model = timed(synthesizer.fit_model, "final_fit")
    stages: dict[str, tuple[float, float]] = {}

    def seen(stage: str, fraction: float) -> None:
        stages.setdefault(stage, (time.perf_counter(), time.process_time()))

    fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
    load_before = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    synth = FairSynthesizer(domain=domain, roles=contract.roles(), epsilon=1.0, delta=1e-9,
                            method="aim", require_fair=False).fit(codes, rng=fit_rng,
                                                                  progress=seen)
    fit_wall, fit_cpu = time.perf_counter() - wall, time.process_time() - cpu
    if "count" in stages and "AIM rounds" in stages:
        spent["counting"] = [stages["AIM rounds"][0] - stages["count"][0],
                             stages["AIM rounds"][1] - stages["count"][1]]
    sample_wall, sample_cpu = time.perf_counter(), time.process_time()
    synthetic = synth.sample(len(codes), rng=sample_rng)
    spent["sampling"] = [time.perf_counter() - sample_wall, time.process_time() - sample_cpu]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pairs = list(itertools.combinations(domain.attributes, 2))
    triples = list(itertools.combinations(domain.attributes, 3))
    if len(triples) > 300:
        pick = np.random.default_rng(12345).choice(len(triples), 300, replace=False)
        triples = [triples[i] for i in sorted(pick)]
    estimation = synth.manifest()["method"]["estimation"]
    inside = sum(spent[p][0] for p in PHASES if p != "sampling")
    inside_cpu = sum(spent[p][1] for p in PHASES if p != "sampling")
    return {
        "wall_s": round(fit_wall + spent["sampling"][0], 2),
        "cpu_s": round(fit_cpu + spent["sampling"][1], 2),
        "fit_wall_s": round(fit_wall, 2), "fit_cpu_s": round(fit_cpu, 2),
        "peak_rss_mb": round(rss, 1), "rounds": len(synth.aim_rounds_),
        "phases": {**{p: {"wall_s": round(w, 2), "cpu_s": round(c, 2)}
                      for p, (w, c) in spent.items()},
                   "other": {"wall_s": round(fit_wall - inside, 2),
                             "cpu_s": round(fit_cpu - inside_cpu, 2)}},
        "final_fit_iterations": estimation["iterations"],
        "stopped_by": estimation["stopped_by"],
        "converged": bool(estimation["converged"])
        and estimation["stopped_by"] in ("tolerance", "exact solution"),
        "tvd2": round(_tvd(codes, synthetic, domain, pairs), 5),
        "tvd3": round(_tvd(codes, synthetic, domain, triples), 5),
        "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "source": _source(),
    }


def _summary(rows: list[dict]) -> dict:
    out: dict[str, object] = {"runs": len(rows)}
    for key in ("wall_s", "cpu_s"):
        out[f"median_{key}"] = round(statistics.median(r[key] for r in rows), 2)
    for key in ("tvd2", "tvd3"):
        values = [r[key] for r in rows]
        out[f"mean_{key}"] = round(statistics.fmean(values), 5)
        out[f"se_{key}"] = (round(statistics.stdev(values) / len(values) ** 0.5, 5)
                            if len(values) > 1 else None)
    out["median_phase_cpu_s"] = {p: round(statistics.median(r["phases"][p]["cpu_s"]
                                                            for r in rows), 2)
                                 for p in rows[0]["phases"]}
    out["all_converged"] = all(r["converged"] for r in rows)
    out["median_peak_rss_mb"] = round(statistics.median(r["peak_rss_mb"] for r in rows), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["adult", "wide41"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--wide-seeds", type=int, default=1,
                        help="seeds for wide41 (each takes minutes on a busy machine)")
    parser.add_argument("--baseline", type=Path,
                        help="a checkout of earlier code, run beside this one")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", nargs=2, metavar=("DATASET", "SEED"))
    args = parser.parse_args()
    if args.worker:
        import json

        if os.environ.get("AIM_SPEED_SRC"):  # the baseline's code before this checkout's
            sys.path.insert(0, os.environ["AIM_SPEED_SRC"])
        print(json.dumps(worker(args.worker[0], int(args.worker[1]))))
        return
    codes = {"current": None}
    if args.baseline:
        codes = {"baseline": str(args.baseline.resolve()), **codes}
    runs: list[dict] = []
    summary = []
    for dataset in args.datasets:
        seeds = args.seeds if dataset == "adult" else args.wide_seeds
        by_code: dict[str, list[dict]] = {code: [] for code in codes}
        for seed in range(seeds):
            for code, path in codes.items():
                env = {"AIM_SPEED_SRC": path or str(ROOT)}
                record = run_worker(__file__, dataset, seed, env=env)
                record.update(code=code, dataset=dataset, seed=seed)
                print(f"{code} {dataset} seed={seed}: {record.get('error') or record['wall_s']}"
                      f" s, {record.get('cpu_s')} CPU-s", file=sys.stderr, flush=True)
                runs.append(record)
                if "error" not in record:
                    by_code[code].append(record)
        for code, rows in by_code.items():
            if rows:
                summary.append({"code": code, "dataset": dataset, **_summary(rows)})
    emit({"benchmark": "aim_speed", "epsilon": 1.0, "delta": 1e-9, "cpus": os.cpu_count(),
          "baseline": str(args.baseline) if args.baseline else None,
          "summary": summary, "runs": runs}, args.out)


ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
