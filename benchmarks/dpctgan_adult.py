"""Peer benchmark: smartnoise-synth's DP-CTGAN on the embedded Adult (issue 12; prints JSON).

The same data and scores as ``benchmarks/gan_adult.py``: Adult as contract codes, the same
80/20 split (``train_test_split`` with ``default_rng(2023)``), S = sex, Y = income; DP-CTGAN is
trained on the 80 % (every attribute categorical), samples as many rows, and is scored by
``benchmarks/_gan_metrics.py``: average 1/2/3-way TVD to the train split, RD(D) of the
synthetic table (P(Y = >50K | Male) − P(Y = >50K | Female)), and a logistic regression trained
on the synthetic rows (one-hot) and tested on the real 20 % (accuracy, RD(η), DTPR, DFPR).
NOT privacy-protected: it scores against real data.

DP-CTGAN lives in its own venv, never the project's (smartnoise-synth pins opacus<0.15, the
project needs opacus>=1.6); the project's venv only exports the split, so privfair is never
imported beside smartnoise::

    python3 -m venv /tmp/venv-ctgan
    /tmp/venv-ctgan/bin/pip install torch==2.13.0
    /tmp/venv-ctgan/bin/pip install -r benchmarks/peers/requirements-dpctgan.txt
    .venv/bin/python benchmarks/dpctgan_adult.py --export /tmp/dpctgan-adult
    /tmp/venv-ctgan/bin/python benchmarks/dpctgan_adult.py --data /tmp/dpctgan-adult \\
        --epsilons 1 10 --out benchmarks/results/dpctgan_adult.json

Settings. smartnoise's defaults (batch 500, 300 epochs, σ = 5) do not fit the 2-core machine:
one epoch of opacus 0.14's per-sample gradients takes minutes there, and at σ = 5 three hundred
epochs spend only ε ≈ 3.5. So each fit runs ``--epochs`` (default 3) at smartnoise's batch size,
and σ is calibrated (``--sigma auto``) with opacus's own RDP accountant, as smartnoise's
privacy engine counts (q = batch / n, two discriminator steps per iteration, its α grid), so
that those epochs spend at most ε; DP-CTGAN itself stops once the spent ε passes the target.
δ = 1e-9 is passed to DP-CTGAN (its default is 1 / (n √n)). ``--time-cap`` stops a fit before
an epoch that would end past the cap (the generator trained so far is sampled and the ε spent
so far reported). Each fit runs in its own process, so its peak RSS is its own, with one torch
thread by default (``--threads``): on the shared 2-core machine two threads spun against the
other load and ran an epoch about 3.5x slower in a probe.

Caveats of the peer, recorded not fixed: DP-CTGAN's conditional vector samples categories with
the train split's true frequencies and draws real rows per category (not the uniform sampling
its q assumes; opacus warns that the budget "will be incorrect"); categories are read from the
data (preprocessor_eps = 0); opacus runs without a secure RNG; and smartnoise reseeds torch with
0 when it builds the discriminator, so ``--seeds`` only changes numpy's draws and the generator's
initial weights.
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

import numpy as np
from _gan_metrics import Sizes, classifier_scores, marginal_tvd, risk_difference

PROTECTED, OUTCOME = "sex", "income"
# smartnoise-synth 1.0.8's DPCTGAN builds its PrivacyEngine with this α grid.
ALPHAS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def export(directory: Path) -> None:
    """Write the project's Adult split as codes (project venv: imports privfair)."""
    from privfair.contracts.datasets import load_codes
    from privfair.evaluation.evaluate import train_test_split

    frame, contract = load_codes("adult")
    domain = contract.domain()
    train, test = train_test_split(frame, rng=np.random.default_rng(2023))
    directory.mkdir(parents=True, exist_ok=True)
    train.to_parquet(directory / "train.parquet", index=False)
    test.to_parquet(directory / "test.parquet", index=False)
    meta = {"dataset": "adult", "split": "train_test_split(rng=default_rng(2023)), 80/20",
            "attributes": list(domain), "sizes": [domain.size(a) for a in domain],
            "labels": {a: contract.labels(a) for a in (PROTECTED, OUTCOME)}}
    (directory / "meta.json").write_text(json.dumps(meta, indent=2))
    print(f"wrote {directory}/train.parquet, test.parquet, meta.json", file=sys.stderr)


def _load(directory: Path):
    import pandas as pd

    meta = json.loads((directory / "meta.json").read_text())
    domain = Sizes(tuple(meta["attributes"]), tuple(meta["sizes"]))
    train = pd.read_parquet(directory / "train.parquet")[list(domain)]
    test = pd.read_parquet(directory / "test.parquet")[list(domain)]
    return meta, domain, train, test


def _codes(frame) -> dict[str, np.ndarray]:
    return {a: frame[a].to_numpy() for a in frame.columns}


def _epsilon(sigma: float, *, q: float, steps: int, delta: float) -> float:
    from opacus import privacy_analysis

    rdp = privacy_analysis.compute_rdp(q, sigma, steps, ALPHAS)
    return float(privacy_analysis.get_privacy_spent(ALPHAS, rdp, delta)[0])


def calibrate_sigma(epsilon: float, *, q: float, steps: int, delta: float) -> float:
    """The smallest σ (to 1e-3) whose ``steps`` DP-SGD steps at rate ``q`` spend ≤ ε."""
    low, high = 0.1, 100.0
    if _epsilon(high, q=q, steps=steps, delta=delta) > epsilon:
        raise ValueError(f"epsilon: {epsilon} is out of reach at sigma <= {high}")
    while high - low > 1e-3:
        mid = (low + high) / 2
        low, high = (low, mid) if _epsilon(mid, q=q, steps=steps, delta=delta) <= epsilon \
            else (mid, high)
    return high


class _TimeCap(Exception):
    """Raised at an epoch start when the next epoch would end past the cap."""


def worker(args: argparse.Namespace) -> dict:
    """Fit DP-CTGAN once and score its sample (peer venv)."""
    from unittest import mock

    import opacus
    import torch
    from snsynth.pytorch.nn import DPCTGAN

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    # smartnoise draws its conditional vectors from numpy's legacy global RNG.
    np.random.seed(args.seed)  # noqa: NPY002
    meta, domain, train, test = _load(args.data)
    n = len(train)
    q, steps_per_epoch = args.batch_size / n, 2 * max(n // args.batch_size, 1)
    sigma = (calibrate_sigma(args.epsilon, q=q, steps=steps_per_epoch * args.epochs,
                             delta=args.delta) if args.sigma == "auto" else float(args.sigma))
    start = time.perf_counter()
    engines: list[opacus.PrivacyEngine] = []

    class Engine(opacus.PrivacyEngine):
        """Keeps the engine DP-CTGAN builds, and enforces the time cap at each epoch start."""

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.epoch_starts: list[float] = []
            engines.append(self)

        def get_privacy_spent(self, *a, **kw):
            now = time.perf_counter()
            self.epoch_starts.append(now)
            spent = super().get_privacy_spent(*a, **kw)
            if len(self.epoch_starts) > 1:
                last = now - self.epoch_starts[-2]
                print(f"dpctgan eps={args.epsilon:g} epoch {len(self.epoch_starts) - 1}"
                      f"/{args.epochs} {last:.0f}s eps_spent {spent[0]:.3f}",
                      file=sys.stderr, flush=True)
                if now - start + last > args.time_cap:
                    raise _TimeCap
            return spent

    model = DPCTGAN(epochs=args.epochs, batch_size=args.batch_size, epsilon=args.epsilon,
                    delta=args.delta, sigma=sigma, cuda=False, verbose=False)
    stopped_by = "epochs"
    cpu = time.process_time()
    with mock.patch.object(opacus, "PrivacyEngine", Engine):
        try:
            model.fit(train, categorical_columns=list(domain))
        except _TimeCap:
            stopped_by = "time cap"
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    epochs_run = len(model.loss_g_list)
    if stopped_by == "epochs" and epochs_run < args.epochs:
        stopped_by = "epsilon"
    engine = engines[0]
    spent = opacus.PrivacyEngine.get_privacy_spent(engine, args.delta)[0]
    sample_start = time.perf_counter()
    synthetic = _codes(model.sample(n))
    sample_seconds = time.perf_counter() - sample_start
    for a in domain:
        if synthetic[a].min() < 0 or synthetic[a].max() >= domain.size(a):
            raise ValueError(f"synthetic column {a!r} leaves its declared domain")
    real = _codes(train)
    return {
        "method": "dpctgan", "library": "smartnoise-synth", "epsilon": args.epsilon,
        "delta": args.delta, "epsilon_spent": float(spent), "seed": args.seed,
        **{f"tvd_{k}": marginal_tvd(real, synthetic, domain, k=k) for k in (1, 2, 3)},
        "rd": risk_difference(synthetic, domain, protected=PROTECTED, outcome=OUTCOME),
        **classifier_scores(synthetic, _codes(test), domain, protected=PROTECTED,
                            outcome=OUTCOME),
        "sigma": sigma, "sigma_rule": "calibrated" if args.sigma == "auto" else "given",
        "clip": model.max_per_sample_grad_norm, "clip_per_layer": True, "q": q,
        "batch_size": args.batch_size, "epochs": args.epochs, "epochs_run": epochs_run,
        "steps_run": engine.steps, "stopped_by": stopped_by, "time_cap_s": args.time_cap,
        "fit_seconds": round(seconds, 1), "fit_cpu_seconds": round(cpu, 1),
        "sample_seconds": round(sample_seconds, 1), "threads": torch.get_num_threads(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("smartnoise-synth", "opacus", "torch", "numpy",
                                    "scikit-learn")}


def drive(args: argparse.Namespace) -> None:
    """One worker process per (seed, ε); the real split's scores as the reference row."""
    meta, domain, train, test = _load(args.data)
    document = {
        "benchmark": "benchmarks/dpctgan_adult.py", "command": " ".join(sys.argv),
        "data": {k: meta[k] for k in ("dataset", "split")}, "versions": _versions(),
        "cpu_count": os.cpu_count(), "loadavg_start": os.getloadavg(),
        "real": {"rd": risk_difference(_codes(train), domain, protected=PROTECTED,
                                       outcome=OUTCOME),
                 **classifier_scores(_codes(train), _codes(test), domain,
                                     protected=PROTECTED, outcome=OUTCOME)},
        "runs": [],
    }
    print(json.dumps({"method": "real", **document["real"]}), flush=True)
    for seed in args.seeds:
        for epsilon in args.epsilons:
            command = [sys.executable, __file__, "--worker", "--data", str(args.data),
                       "--epsilon", str(epsilon), "--seed", str(seed), "--delta",
                       str(args.delta), "--epochs", str(args.epochs), "--batch-size",
                       str(args.batch_size), "--sigma", args.sigma, "--time-cap",
                       str(args.time_cap), "--threads", str(args.threads)]
            load = os.getloadavg()
            result = subprocess.run(command, stdout=subprocess.PIPE, text=True)
            row = (json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0
                   else {"method": "dpctgan", "epsilon": epsilon, "seed": seed,
                         "error": f"worker exited {result.returncode}"})
            row.update(loadavg_start=load, loadavg_end=os.getloadavg())
            print(json.dumps(row), flush=True)
            document["runs"].append(row)
    document["loadavg_end"] = os.getloadavg()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=Path, help="project venv: write the split here, exit")
    parser.add_argument("--data", type=Path, default=Path("/tmp/dpctgan-adult"))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=500, help="smartnoise's default")
    parser.add_argument("--sigma", default="auto", help="'auto' or a noise multiplier")
    parser.add_argument("--time-cap", type=float, default=570.0, help="seconds per fit")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 0 = torch's default")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--epsilon", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("epochs", "batch_size"):
        if getattr(args, name) < 1 or (name == "batch_size" and args.batch_size % 2):
            parser.error(f"--{name.replace('_', '-')}: expected a positive"
                         f"{' even' if name == 'batch_size' else ''} integer")
    if args.sigma != "auto" and not (_is_float(args.sigma) and float(args.sigma) > 0):
        parser.error(f"--sigma: expected 'auto' or a positive number, got {args.sigma!r}")
    if any(not math.isfinite(e) or e <= 0 for e in args.epsilons):
        parser.error("--epsilons: expected finite positive numbers")
    if args.export:
        export(args.export)
    elif args.worker:
        print(json.dumps(worker(args)), flush=True)
    else:
        drive(args)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


if __name__ == "__main__":
    main()
