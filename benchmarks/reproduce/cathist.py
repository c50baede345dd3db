"""CatHist (Rodriguez & Howe 2018) Fig. 2: fidelity vs tolerance ρ, ε and domain size.

The paper runs Algorithm 1 100 times on Adult's sex (domain: English words, 1.71e5) and
workclass / marital-status (word pairs, 2.94e10) and plots the mean fidelity F. F is "the
product of the probability densities of the true distribution and the results over the
intersection of the category sets" (F = 1 for equal sets, 0 for disjoint ones); we read it as
(true mass on the intersection) × (released mass on the intersection). The figure's numbers
are not printed, so each stated trend is checked, on UCI's adult.data (the paper's "UCI
Adult") with our whole 48,842-row table beside it; the error of the released histogram (TVD
to the true one over the union of categories) is reported beside F.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import (
    cell,
    failed_rows,
    mean_sd,
    ok_metrics,
    paper_json,
    png_of,
)

NAME = "cathist"
TITLE = "CatHist (Rodriguez & Howe 2018) Fig. 2: fidelity and error vs ρ, ε, domain size"
ATTRIBUTES = {"sex": 171_000, "workclass": 29_400_000_000, "marital-status": 29_400_000_000}
EPSILONS = (0.01, 0.1, 1.0)
TOLERANCES = (0.1, 0.5, 0.9)
#: Rows of UCI's adult.data, the first rows of our 48,842-row Adult (adult.data, then
#: adult.test): the paper's "UCI Adult" is read as that file alone, the paper's setting every
#: claim is judged on; our whole table runs beside it (shown, not counted).
ADULT_DATA_ROWS = 32_561
#: The rows each cell reads: the paper's file, then ours (None: the whole table).
ROWS = (ADULT_DATA_ROWS, None)


@dataclass(frozen=True)
class _Universe:
    """A universe of ``size`` labels: the active values first, then synthetic ones."""

    active: tuple[str, ...]
    n: int

    @property
    def size(self) -> int:
        return self.n

    def __contains__(self, label: object) -> bool:
        return isinstance(label, str) and (label in self.active or label.startswith("~"))

    def label(self, index: int) -> str:
        return self.active[index] if index < len(self.active) else f"~{index}"


def cells(mode: str) -> list[dict[str, Any]]:
    repeats = 20 if mode == "quick" else 100
    return [cell(NAME, {"attribute": a, "epsilon": e, "tolerance": t, "repeats": repeats}
                 | ({} if rows is None else {"rows": rows}), 0)
            for rows in ROWS for a in ATTRIBUTES for e in EPSILONS for t in TOLERANCES]


def _true_counts(attribute: str, rows: int | None = None) -> dict[str, int]:
    from privfair.contracts.datasets import load_dataset

    values = load_dataset("adult")[attribute].astype(str).str.strip()
    return values.iloc[:rows].value_counts().to_dict()


def run(c: dict[str, Any]) -> dict[str, Any]:
    from privfair.core.accounting import PrivacyLedger
    from privfair.domains.cathist import cathist

    s = c["setting"]
    counts = _true_counts(s["attribute"], s.get("rows"))
    universe = _Universe(tuple(sorted(counts)), ATTRIBUTES[s["attribute"]])
    true = np.array([counts[k] for k in universe.active], dtype=float)
    true_p = dict(zip(universe.active, true / true.sum(), strict=True))
    rng = np.random.default_rng([c["seed"], 7])
    fidelity, error, outside = [], [], []
    for _ in range(s["repeats"]):
        eps = s["epsilon"]
        result = cathist(counts, universe=universe, tolerance=s["tolerance"], epsilon=eps,
                         rng=rng, ledger=PrivacyLedger(rho_budget=eps**2 / 2 + 1e-12))
        released = dict(zip(result.categories, result.noisy_counts, strict=True))
        total = sum(released.values())
        rel_p = {k: v / total for k, v in released.items()} if total else {}
        common = set(rel_p) & set(true_p)
        fidelity.append(sum(true_p[k] for k in common) * sum(rel_p[k] for k in common))
        keys = set(rel_p) | set(true_p)
        error.append(0.5 * sum(abs(true_p.get(k, 0) - rel_p.get(k, 0)) for k in keys))
        outside.append(result.n_outside)
    return {"fidelity": float(np.mean(fidelity)), "tvd": float(np.mean(error)),
            "outside": float(np.mean(outside)), "tau": float(result.tau),
            "n_rows": int(true.sum()),
            "between_tau": between_tau(counts, s["epsilon"], ATTRIBUTES[s["attribute"]])}


def between_tau(counts: dict[str, int], epsilon: float, domain_size: float) -> dict[str, int]:
    """The true categories whose count lies between τ(ρ = 0.1) and τ(ρ = 0.9): those that a
    higher tolerance ρ can drop (τ rises with ρ)."""
    from privfair.domains.cathist import cathist_threshold

    low, high = (cathist_threshold(epsilon=epsilon, domain_size=domain_size, tolerance=t)
                 for t in (TOLERANCES[0], TOLERANCES[-1]))
    return {k: int(v) for k, v in sorted(counts.items()) if low <= v < high}


def _value(records, attribute, eps, tol, key="fidelity", rows=ADULT_DATA_ROWS) -> float:
    values = [m[key] for m in ok_metrics(records, attribute=attribute, epsilon=eps,
                                         tolerance=tol, rows=rows)]
    return mean_sd(values)[0]


def workclass_why(records) -> str | None:
    """Measured reading of the workclass ε = 0.01 exception: F and τ on adult.data alone, and
    the categories between τ(ρ = 0.1) and τ(ρ = 0.9) in both tables (None before the cells
    ran)."""
    full = ok_metrics(records, attribute="workclass", epsilon=0.01, rows=None)
    small = {m["tolerance"]: m for m in (
        {**r["metrics"], "tolerance": r["setting"]["tolerance"]} for r in records
        if r["status"] == "ok" and r["setting"].get("rows") == ADULT_DATA_ROWS
        and r["setting"]["attribute"] == "workclass" and r["setting"]["epsilon"] == 0.01)}
    if len(small) < len(TOLERANCES) or not full or "between_tau" not in full[0]:
        return None
    f = [small[t]["fidelity"] for t in TOLERANCES]
    tau = [small[t]["tau"] for t in TOLERANCES]

    def listed(between: dict[str, int]) -> str:
        return ", ".join(f"{k} ({v})" for k, v in between.items()) or "none"

    falls = f[-1] < f[1] - 0.005
    return (f"on the {ADULT_DATA_ROWS:,}-row UCI adult.data alone F = "
            + " / ".join(f"{v:.3f}" for v in f) + " at ρ = 0.1/0.5/0.9 (τ = "
            + " / ".join(f"{v:.0f}" for v in tau) + "): " + ("it falls at high ρ, as the paper "
            "says, because" if falls else "it does not fall either, though")
            + f" workclass counts between τ(0.1) and τ(0.9) there: "
            f"{listed(small[TOLERANCES[0]]['between_tau'])}; in our {full[0]['n_rows']:,}-row "
            f"table: {listed(full[0]['between_tau'])}")


def _claims(records, rows: int | None) -> dict[str, tuple[bool, str]]:
    """Each claim of the text: whether it holds on the cells that read ``rows``, and the
    measured detail."""
    def f(a, e, t):
        return _value(records, a, e, t, rows=rows)

    rising = [(a, e) for a in ATTRIBUTES for e in EPSILONS
              if not (a == "workclass" and e == 0.01)]
    ok = [f(a, e, TOLERANCES[-1]) >= f(a, e, TOLERANCES[0]) - 0.01 for a, e in rising]
    w = [f("workclass", 0.01, t) for t in TOLERANCES]
    sex_best = [f("sex", e, t) >= max(f(a, e, t) for a in ATTRIBUTES) - 1e-9
                for e in EPSILONS for t in TOLERANCES]
    top = max(f("sex", e, 0.9) for e in EPSILONS)
    return {
        "rho_increases_fidelity": (all(ok), f"F(ρ=0.9) ≥ F(ρ=0.1) in {sum(ok)}/{len(ok)} "
                                   "(attribute, ε) pairs"),
        "workclass_eps001_decreasing": (w[-1] <= w[0] + 0.01, "workclass, ε = 0.01: F = "
                                        + " / ".join(f"{v:.3f}" for v in w)
                                        + " at ρ = 0.1/0.5/0.9"),
        "sex_highest": (all(sex_best), f"sex has the highest F in {sum(sex_best)}/"
                        f"{len(sex_best)} (ε, ρ) settings"),
        "sex_near_one_rho09": (top >= 0.95, f"best F for sex at ρ = 0.9: {top:.3f}")}


def summarize(records: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    meta = paper_json("cathist_fig2")
    rows = []
    for a in ATTRIBUTES:
        for e in EPSILONS:
            for t in TOLERANCES:
                rows.append({"setting": f"{a} (n = {ATTRIBUTES[a]:.3g}), ε={e:g}, ρ={t:g}",
                             "metric": "fidelity F / TVD", "paper": None, "paper_sd": None,
                             "source": meta["source"], "ours": _value(records, a, e, t),
                             "ours_sd": _value(records, a, e, t, "tvd"), "n": 1,
                             "verdict": "not comparable",
                             "why": "the figure's values are not printed (ours_sd column "
                                    "holds the TVD error here)"})
    claims = {c["id"]: c["text"] for c in meta["claims"]}
    finished = sum(r["status"] == "ok" for r in records)
    on_paper_file, on_ours = _claims(records, ADULT_DATA_ROWS), _claims(records, None)
    for cid, (holds, detail) in on_paper_file.items():
        # A trend over cells not run yet (a --full in progress) is unknown, not broken.
        word = "not comparable" if finished < len(records) else (
            "within" if holds else "worse")
        theirs, our_detail = on_ours[cid]
        detail = (f"on the paper's {ADULT_DATA_ROWS:,}-row UCI adult.data: {detail}; on our "
                  f"48,842-row table (adult.data + adult.test, not counted): {our_detail}, "
                  + ("holds" if theirs else "does not hold"))
        if cid == "workclass_eps001_decreasing" and holds != theirs:
            detail += "; " + (workclass_why(records) or "")
        rows.append({"setting": "trend", "metric": claims[cid], "paper": None,
                     "paper_sd": None, "source": meta["source"], "ours": float(holds),
                     "ours_sd": 0.0, "ours_se": 0.0, "n": 1, "verdict": word,
                     "why": detail if finished == len(records) else
                     f"{finished} of {len(records)} cells finished; {detail}",
                     "explained": False, "informative": "yes", "counter_runs": []})
    return {"name": NAME, "title": TITLE, "source": meta["source"], "rows": rows,
            "notes": [meta["note"], __doc__.split("\n\n")[1].replace("\n", " ")],
            "plots": [_plot(records)], "failed": failed_rows(records)}


def _plot(records) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, a in enumerate(ATTRIBUTES):
        for j, e in enumerate(EPSILONS):
            style = ("-", "--", ":")[j]
            axes[0].plot(TOLERANCES, [_value(records, a, e, t) for t in TOLERANCES], style,
                         color=f"C{i}", marker="o", label=f"{a} ε={e:g}")
            axes[1].plot(TOLERANCES, [_value(records, a, e, t, "tvd") for t in TOLERANCES],
                         style, color=f"C{i}", marker="o")
    axes[0].set_ylabel("fidelity F")
    axes[1].set_ylabel("TVD to the true histogram")
    for ax in axes:
        ax.set_xlabel("tolerance ρ")
    axes[0].legend(fontsize=6, ncol=3)
    fig.tight_layout()
    return {"title": "CatHist fidelity and error vs ρ, ε and domain size (as Fig. 2)",
            "png": png_of(fig)}
