"""Speed against the peers, measured in one run (issue 23.4; prints JSON).

One process tree: this driver (the project's venv) exports the discretised data as codes, then
runs every fit in a fresh child process so that its peak RSS is its own:

* privfair's MST and AIM (``FairSynthesizer``, project venv) and smartnoise-synth's MST and AIM
  (``snsynth``, which runs on ``mbi``), on the same Adult and COMPAS codes, ε = 1, δ = 1e-9;
* privfair's DP GAN (``dpgan``, ``benchmarks/gan_adult.py``'s worker) and smartnoise's DP-CTGAN
  (``benchmarks/dpctgan_adult.py``'s worker) on the same Adult split (``--gan``).

The peers live in a venv of their own, ``.bench-venv`` (gitignored), which this script creates
on first use: ``pip install`` of ``benchmarks/peers/requirements-dpctgan.txt`` (smartnoise-synth
1.0.8 with mbi 1.1, opacus 0.14, torch). They are never project dependencies (smartnoise pins
mbi<2 and opacus<0.15). Each synthetic table comes back as Parquet codes and the driver scores
both sides with the same function (mean 2-way TVD against the input,
``privfair.evaluation.utility.marginal_tvd``), so the TVDs are comparable. The JSON gives per
(dataset, method) both fit times, both peak RSS, both TVDs and the ratios peer / privfair.

Peers take the domain and n from the data (their own defaults; see /work/shared/notes/peers.md),
privfair takes them from the contract and measures n privately. A peer fit that passes
``--peer-timeout`` is stopped and reported as a lower bound.

Caveat (first run, results/peer_speed.json): in this venv the peers' one-way marginals are
right but their joints are not (COMPAS MST: corr(age_cat, two_year_recid) 0.65 in the sample
against -0.16 in the data), so their 2-way TVDs (MST 0.14 on COMPAS, 0.11 on Adult; AIM 0.05
on COMPAS) are far above the figures published for them (AIM on COMPAS ≈ 0.012); the
smartnoise-synth 1.0.8 × mbi 1.1 (JAX) pairing is the suspect, not investigated further. Fit
times and memory are what the peers cost as installed.

    python benchmarks/peer_speed.py --out benchmarks/results/peer_speed.json
    python benchmarks/peer_speed.py --datasets compas --methods mst    # quick look
    python benchmarks/peer_speed.py --gan --gan-epochs 1                # add DP-CTGAN vs dpgan
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench-venv"
REQUIREMENTS = ROOT / "benchmarks" / "peers" / "requirements-dpctgan.txt"
#: A local CPU wheel of torch, used when the machine has one (PyPI's default is CUDA's).
WHEELS = Path("/opt/wheels")


# --- peer side (runs in .bench-venv: stdlib, numpy, pandas, snsynth only) ----------------------

def peer_worker(method: str, data: str, out: str, epsilon: float, delta: float,
                seed: int) -> dict:
    import numpy as np
    import pandas as pd
    from snsynth import Synthesizer

    codes = pd.read_parquet(data)
    np.random.seed(seed)  # noqa: NPY002 - the peer draws from numpy's global generator
    options = {"mst": {}, "aim": {"max_model_size": 80}}[method]
    synth = Synthesizer.create(method, epsilon=epsilon, delta=delta, **options)
    start = time.perf_counter()
    synth.fit(codes, categorical_columns=list(codes.columns), preprocessor_eps=0.0)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    synthetic = synth.sample(len(codes))
    sample_s = time.perf_counter() - start
    pd.DataFrame(synthetic, columns=codes.columns).astype("int64").to_parquet(out)
    return {"fit_s": fit_s, "sample_s": sample_s,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# --- project side ------------------------------------------------------------------------------

def privfair_worker(method: str, dataset: str, out: str, epsilon: float, delta: float,
                    seed: int) -> dict:
    import numpy as np
    from _common import load_codes

    from privfair.synth.synthesizer import FairSynthesizer

    codes, contract = load_codes(dataset)
    fit_rng, sample_rng = np.random.default_rng(seed).spawn(2)
    synth = FairSynthesizer(domain=contract.domain(), roles=contract.roles(), epsilon=epsilon,
                            delta=delta, method=method, require_fair=False,
                            max_time_s=240.0 if method == "aim" else None)
    start = time.perf_counter()
    synth.fit(codes, rng=fit_rng)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    synthetic = synth.sample(len(codes), rng=sample_rng)
    sample_s = time.perf_counter() - start
    synthetic.to_parquet(out)
    return {"fit_s": fit_s, "sample_s": sample_s,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def ensure_venv() -> Path:
    """Create ``.bench-venv`` with the peers (first use only); return its python."""
    python = VENV / "bin" / "python"
    if python.exists():
        done = subprocess.run([str(python), "-c", "import snsynth, mbi"], capture_output=True)
        if done.returncode == 0:
            return python
    print(f"creating {VENV} (smartnoise-synth, mbi, opacus, torch) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    torch = sorted(WHEELS.glob("torch-2.13.0+cpu-*.whl")) if WHEELS.is_dir() else []
    subprocess.run([*pip, str(torch[0]) if torch else "torch==2.13.0"], check=True)
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    return python


def child(python: str, args: list[str], timeout: float, *, script: str = __file__,
          env: dict[str, str] | None = None) -> dict:
    """Run ``script``'s worker (this script's by default) in a child process under
    ``python``, ``env`` added to the environment; its JSON line, or why there is none."""
    start = time.perf_counter()
    try:
        done = subprocess.run([python, script, *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})})
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout:g} s", "timed_out": True,
                "fit_s": timeout, "wall_s": timeout}
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][-300:],
                "wall_s": wall}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "wall_s": wall}


def tvd2(dataset: str, path: Path) -> float | None:
    import pandas as pd
    from _common import load_codes

    from privfair.evaluation.utility import marginal_tvd

    if not path.exists():
        return None
    codes, contract = load_codes(dataset)
    return marginal_tvd(codes, pd.read_parquet(path)[list(codes.columns)], contract.domain(), 2)


def _ratio(a, b) -> float | None:
    return round(a / b, 2) if a and b else None


def tables(args: argparse.Namespace, python: Path, work: Path) -> list[dict]:
    from _common import load_codes

    rows = []
    for dataset in args.datasets:
        codes, _ = load_codes(dataset)
        data = work / f"{dataset}.parquet"
        codes.to_parquet(data)
        for method in args.methods:
            ours_out, peer_out = work / f"{dataset}-{method}-privfair.parquet", \
                work / f"{dataset}-{method}-peer.parquet"
            common = [method, "--eps", str(args.eps), "--delta", str(args.delta),
                      "--seed", str(args.seed)]
            ours = child(sys.executable, ["--privfair-worker", *common, "--dataset", dataset,
                                          "--result", str(ours_out)], args.ours_timeout)
            peer = child(str(python), ["--peer-worker", *common, "--data", str(data),
                                       "--result", str(peer_out)], args.peer_timeout)
            row = {"dataset": dataset, "method": method, "rows": len(codes),
                   "privfair": {**ours, "tvd2": tvd2(dataset, ours_out)},
                   "peer": {**peer, "tvd2": tvd2(dataset, peer_out),
                            "package": "smartnoise-synth 1.0.8 (mbi 1.1)"}}
            row["fit_time_ratio_peer_over_privfair"] = _ratio(peer.get("fit_s"),
                                                              ours.get("fit_s"))
            row["peak_rss_ratio_peer_over_privfair"] = _ratio(peer.get("peak_rss_mb"),
                                                              ours.get("peak_rss_mb"))
            if peer.get("timed_out"):
                row["note"] = "peer stopped at the timeout: its fit time is a lower bound"
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def gans(args: argparse.Namespace, python: Path, work: Path) -> dict:
    """DP-CTGAN (peer venv) against privfair's dpgan (project venv) on the same Adult split."""
    split = work / "gan-split"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dpctgan_adult.py"), "--export",
                    str(split)], check=True, cwd=ROOT, capture_output=True)
    start = time.perf_counter()
    peer = subprocess.run(
        [str(python), str(ROOT / "benchmarks" / "dpctgan_adult.py"), "--worker", "--data",
         str(split), "--epsilon", str(args.eps), "--seed", str(args.seed), "--delta",
         str(args.delta), "--epochs", str(args.gan_epochs), "--time-cap",
         str(args.gan_time_cap)], capture_output=True, text=True, cwd=ROOT)
    peer_row = (json.loads(peer.stdout.strip().splitlines()[-1]) if peer.returncode == 0
                else {"error": peer.stderr.strip()[-300:]})
    peer_row["wall_s"] = time.perf_counter() - start
    start = time.perf_counter()
    ours = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gan_adult.py"), "--methods", "dpgan",
         "--epsilons", str(args.eps), "--epochs", str(args.gan_epochs)],
        capture_output=True, text=True, cwd=ROOT)
    lines = [json.loads(x) for x in ours.stdout.splitlines() if x.startswith("{")]
    ours_row = lines[-1] if ours.returncode == 0 and lines else {
        "error": ours.stderr.strip()[-300:]}
    ours_row["wall_s"] = time.perf_counter() - start
    pick = ("fit_seconds", "peak_rss_mb", "tvd_2", "epochs_run", "epsilon_spent", "wall_s",
            "error")
    out = {"dataset": "adult (80 % split)", "epochs": args.gan_epochs,
           "privfair_dpgan": {k: ours_row.get(k) for k in pick if k in ours_row},
           "peer_dpctgan": {k: peer_row.get(k) for k in pick if k in peer_row}}
    out["fit_time_ratio_peer_over_privfair"] = _ratio(peer_row.get("fit_seconds"),
                                                      ours_row.get("fit_seconds"))
    out["peak_rss_ratio_peer_over_privfair"] = _ratio(peer_row.get("peak_rss_mb"),
                                                      ours_row.get("peak_rss_mb"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["compas", "adult"])
    parser.add_argument("--methods", nargs="+", default=["mst", "aim"])
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peer-timeout", type=float, default=1200.0)
    parser.add_argument("--ours-timeout", type=float, default=600.0)
    parser.add_argument("--gan", action="store_true", help="also DP-CTGAN against dpgan")
    parser.add_argument("--no-tables", action="store_true", help="skip MST/AIM (with --gan)")
    parser.add_argument("--gan-epochs", type=int, default=1)
    parser.add_argument("--gan-time-cap", type=float, default=570.0)
    parser.add_argument("--out", type=Path)
    # worker modes (children of the driver)
    parser.add_argument("--peer-worker", metavar="METHOD")
    parser.add_argument("--privfair-worker", metavar="METHOD")
    parser.add_argument("--data")
    parser.add_argument("--dataset")
    parser.add_argument("--result")
    args = parser.parse_args()
    if args.peer_worker:
        print(json.dumps(peer_worker(args.peer_worker, args.data, args.result, args.eps,
                                     args.delta, args.seed)))
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    if args.privfair_worker:
        print(json.dumps(privfair_worker(args.privfair_worker, args.dataset, args.result,
                                         args.eps, args.delta, args.seed)))
        return
    import tempfile

    from _common import emit

    python = ensure_venv()
    versions = subprocess.run(
        [str(python), "-c", "from importlib.metadata import version as v; import json; "
         "print(json.dumps({p: v(p) for p in ('smartnoise-synth', 'mbi', 'jax', 'opacus', "
         "'torch')}))"], capture_output=True, text=True).stdout.strip()
    document = {"benchmark": "peer_speed", "epsilon": args.eps, "delta": args.delta,
                "seed": args.seed, "cpu_count": os.cpu_count(),
                "peer_versions": json.loads(versions or "{}"),
                "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_tables:
            document["tables"] = tables(args, python, Path(tmp))
        if args.gan:
            document["gan"] = gans(args, python, Path(tmp))
    document["load_avg_end"] = os.getloadavg()
    emit(document, args.out)


if __name__ == "__main__":
    main()
