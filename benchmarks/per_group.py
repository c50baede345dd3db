"""Per-group fitting against the pooled model (issue 34.3): utility and parity per group.

For Adult and COMPAS (embedded, discretised by their contracts, split 80/20 with seed 2023),
each (ε, seed) fits the pooled :class:`~privfair.synth.synthesizer.FairSynthesizer` and the
:class:`~privfair.synth.per_group.PerGroupSynthesizer` (one model per noisy-large group of
``race``, parallel composition, the same (ε, δ)), samples as many rows as the training split
and measures :func:`~privfair.evaluation.per_group.per_group_figures` for the ``race`` groups:
2-way TVD of each group's synthetic rows against its real rows, and a logistic regression
trained on the synthetic table, tested on the group's real held-out rows (accuracy, TPR,
FPR), beside the same model trained on the real split. Parity: the largest gap between
groups in accuracy, TPR and FPR. Evaluation reads the real table on purpose: the figures are
not privacy-protected.

    python benchmarks/per_group.py --out benchmarks/results/per_group.json
    python benchmarks/per_group.py --datasets compas --eps 1 --seeds 1     # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _common import emit

COLUMN = "race"


def _gap(groups: list[dict], source: str, key: str) -> float | None:
    values = [g[source][key] for g in groups if g[source][key] is not None]
    return max(values) - min(values) if len(values) > 1 else None


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def run(datasets: list[str], eps: list[float], seeds: int, method: str,
        min_group_rows: float) -> dict:
    import numpy as np

    from privfair.contracts.datasets import load_codes
    from privfair.evaluation.evaluate import load_embedded
    from privfair.evaluation.per_group import per_group_figures
    from privfair.synth.per_group import PerGroupSynthesizer
    from privfair.synth.synthesizer import FairSynthesizer

    cells = []
    for name in datasets:
        data = load_embedded(name)
        labels = {COLUMN: load_codes(name)[1].labels(COLUMN)}
        for epsilon in eps:
            for seed in range(seeds):
                for mode in ("pooled", "per_group"):
                    fit_rng, sample_rng = np.random.default_rng([seed, 34]).spawn(2)
                    start = time.perf_counter()
                    if mode == "pooled":
                        model = FairSynthesizer(domain=data.domain, roles=data.roles,
                                                epsilon=epsilon, delta=1e-9, method=method)
                    else:
                        model = PerGroupSynthesizer(domain=data.domain, roles=data.roles,
                                                    epsilon=epsilon, delta=1e-9, method=method,
                                                    column=COLUMN,
                                                    min_group_rows=min_group_rows)
                    model.fit(data.train, rng=fit_rng)
                    synthetic = model.sample(len(data.train), rng=sample_rng)
                    seconds = time.perf_counter() - start
                    figures = per_group_figures(
                        synthetic, real_train=data.train, real_test=data.test,
                        domain=data.domain, roles=data.roles.__class__(
                            protected=(COLUMN,), admissible=data.roles.admissible,
                            outcome=data.roles.outcome),
                        labels=labels, classifier="logistic", seed=seed)
                    groups = figures["attributes"][COLUMN]
                    cells.append({
                        "dataset": name, "epsilon": epsilon, "seed": seed, "mode": mode,
                        "fit_sample_s": round(seconds, 2),
                        "spent_rho": model.ledger_.spent,
                        "budget_rho": model.ledger_.rho_budget,
                        "parts": [p.name for p in getattr(model, "parts_", ())],
                        "groups": groups,
                        "accuracy_gap": _gap(groups, "synthetic", "accuracy"),
                        "tpr_gap": _gap(groups, "synthetic", "tpr"),
                        "fpr_gap": _gap(groups, "synthetic", "fpr"),
                    })
                    print(f"{name} eps={epsilon} seed={seed} {mode}: {seconds:.1f}s",
                          file=sys.stderr)
    return {"cells": cells, "summary": summarise(cells)}


def summarise(cells: list[dict]) -> list[dict]:
    """Mean over seeds per (dataset, ε, mode): per-group TVD and accuracy, and the gaps."""
    keys = sorted({(c["dataset"], c["epsilon"], c["mode"]) for c in cells},
                  key=lambda k: (k[0], k[1], k[2] != "pooled"))
    rows = []
    for dataset, epsilon, mode in keys:
        chosen = [c for c in cells if (c["dataset"], c["epsilon"], c["mode"]) ==
                  (dataset, epsilon, mode)]
        names = [g["group"] for g in chosen[0]["groups"]]
        per = {}
        for i, group in enumerate(names):
            per[group] = {
                "train_rows": chosen[0]["groups"][i]["train_rows"],
                "tvd2": _mean([c["groups"][i]["tvd2"] for c in chosen]),
                "accuracy": _mean([c["groups"][i]["synthetic"]["accuracy"] for c in chosen]),
                "accuracy_real_trained": _mean([c["groups"][i]["real"]["accuracy"]
                                                for c in chosen]),
                "tpr": _mean([c["groups"][i]["synthetic"]["tpr"] for c in chosen]),
                "fpr": _mean([c["groups"][i]["synthetic"]["fpr"] for c in chosen]),
            }
        worst = max((v["tvd2"] for v in per.values() if v["tvd2"] is not None), default=None)
        rows.append({"dataset": dataset, "epsilon": epsilon, "mode": mode,
                     "seeds": len(chosen), "worst_group_tvd2": worst,
                     "accuracy_gap": _mean([c["accuracy_gap"] for c in chosen]),
                     "tpr_gap": _mean([c["tpr_gap"] for c in chosen]),
                     "fpr_gap": _mean([c["fpr_gap"] for c in chosen]),
                     "groups": per})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["adult", "compas"])
    parser.add_argument("--eps", nargs="+", type=float, default=[1.0, 4.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--method", default="mst")
    parser.add_argument("--min-group-rows", type=float, default=200.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    document = run(args.datasets, args.eps, args.seeds, args.method, args.min_group_rows)
    document = {"column": COLUMN, "method": args.method, "min_group_rows": args.min_group_rows,
                "classifier": "logistic", "delta": 1e-9,
                "not_privacy_protected": "evaluation on the real tables",
                "seconds": round(time.perf_counter() - start, 1), **document}
    emit(document, args.out)


if __name__ == "__main__":
    main()
