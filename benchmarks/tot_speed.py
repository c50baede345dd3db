"""TOT (optimized pre-processing) speed: set-up, solve, size, objective, discrimination.

Prints one JSON document. Two set-ups on the embedded UCI Adult data (48,842 rows):

* ``calmon-adult``: D = race × sex (4 groups), X = age decade (7) × education (8 SAFES levels),
  Y = income (2): a 448 × 112 dense map (AIF360 measured ≈2.3 s to optimize its 504 × 126
  version on 2 cores). Distortion "safes-adult", clist (0.99, 1.99, 2.99), dlist (0.1, 0.05, 0).
* ``adult-hours``: X also holds hours-per-week in 10 bins (|X×Y| = 1,120, 10× larger; the dense
  map is 4,480 × 1,120 ≈ 5.0 M). Two distortions: ``hours-adjacent`` (safes-adult, plus 1.0 for
  moving hours one bin and 3.0 for more) and ``hours-free`` (plain safes-adult: hours may change
  at no cost, the worst case for sparsity).

For each, the sparse program is solved with Clarabel and HiGHS; the dense formulation (every
transition a variable, forbidden ones bounded by 0, as AIF360) is solved for comparison on
``calmon-adult`` (and on the larger set-up with ``--dense-large``).

    python benchmarks/tot_speed.py                # ≈ 1 min on 2 cores
    python benchmarks/tot_speed.py --repeat 3

The map is fitted on the real data here because this measures speed; in a release it is fitted
on DP synthetic data only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import pandas as pd

from privfair.contracts.datasets import load_dataset
from privfair.core.domain import Domain
from privfair.core.errors import DomainError
from privfair.fair.tot import TOTransform, safes_adult_distortion

TARGET_S = 5.0



# The Calmon et al. / AIF360 Adult set-up (age in 7 decades, 8 education levels).

#: Education levels of the SAFES Adult set-up (Table 1), in order of attainment.
SAFES_ADULT_EDUCATION = ("<11th", "11th-12th", "HS-grad", "Some-college", "Assoc-voc",
                         "Assoc-acdm", "Bachelors", "Graduate")
_EDUCATION_LEVEL = {
    "Preschool": 0, "1st-4th": 0, "5th-6th": 0, "7th-8th": 0, "9th": 0, "10th": 0,
    "11th": 1, "12th": 1, "HS-grad": 2, "Some-college": 3, "Assoc-voc": 4, "Assoc-acdm": 5,
    "Bachelors": 6, "Masters": 7, "Prof-school": 7, "Doctorate": 7,
}


def encode_safes_adult(raw: pd.DataFrame) -> tuple[pd.DataFrame, Domain]:
    """Code raw UCI Adult rows for the Calmon/SAFES TOT set-up.

    Returns integer codes for ``race`` (0 non-white, 1 white), ``sex`` (0 female, 1 male),
    ``age`` (decades: <20, 20s, ..., 60s, 70+ -- 7 levels, as Calmon et al./AIF360),
    ``education`` (the 8 ordered levels of :data:`SAFES_ADULT_EDUCATION`; SAFES Table 1 with
    11th and 12th merged) and ``income`` (1 = ``>50K``), with the declared domain. The levels are
    a public declaration, not read from the data; an unknown education label is refused.
    """
    education = raw["education"].astype(str).str.strip().map(_EDUCATION_LEVEL)
    if education.isna().any():
        raise DomainError("column 'education': labels outside the declared Adult categories")
    age = pd.to_numeric(raw["age"]).to_numpy()
    income = raw["income"].astype(str).str.strip().str.rstrip(".")
    codes = pd.DataFrame({
        "race": (raw["race"].astype(str).str.strip() == "White").to_numpy(np.int64),
        "sex": (raw["sex"].astype(str).str.strip() == "Male").to_numpy(np.int64),
        "age": np.clip(age // 10, 1, 7).astype(np.int64) - 1,
        "education": education.to_numpy(np.int64),
        "income": (income == ">50K").to_numpy(np.int64),
    })
    domain = Domain(("race", "sex", "age", "education", "income"), (2, 2, 7, 8, 2))
    return codes, domain

def _data() -> tuple[pd.DataFrame, Domain]:
    raw = load_dataset("adult")
    codes, domain = encode_safes_adult(raw)
    hours = pd.to_numeric(raw["hours-per-week"]).to_numpy()
    codes["hours"] = np.clip((hours - 1) // 10, 0, 9).astype(np.int64)
    return codes, Domain((*domain.attributes, "hours"), (*domain.sizes, 10))


def hours_adjacent(old, new):
    """safes-adult, plus 1.0 for moving hours one bin and 3.0 for moving it further."""
    step = np.abs(np.asarray(new["hours"], np.int64) - np.asarray(old["hours"], np.int64))
    extra = np.where(step > 1, 3.0, np.where(step == 1, 1.0, 0.0))
    return np.maximum(safes_adult_distortion(old, new), extra)


def run(frame: pd.DataFrame, domain: Domain, *, x_cols, distortion, eta: float, form: str,
        solver: str, dense: bool, repeat: int, max_variables: int) -> dict:
    times, record = [], {}
    for _ in range(repeat):
        t = TOTransform(d_cols=["race", "sex"], x_cols=x_cols, y_col="income", domain=domain,
                        eta=eta, discrimination=form, distortion=distortion, solver=solver,
                        max_variables=max_variables)
        start = time.perf_counter()
        if dense:
            from privfair.fair.tot import _Layout, _support

            layout = _Layout.build(domain, t.d_cols, t.x_cols, t.y_col)
            keys, mass = _support(layout, frame)
            t._fit(layout, keys, mass, dense=True)
        else:
            t.fit(frame)
        fit_s = time.perf_counter() - start
        times.append((fit_s, t.setup_time_, t.solve_time_))
        record = t.to_manifest()
    start = time.perf_counter()
    t.transform(frame, rng=np.random.default_rng(0))
    transform_s = time.perf_counter() - start
    med = [statistics.median(col) for col in zip(*times, strict=True)]
    disc = record["achieved_discrimination"]
    return {
        "formulation": "dense" if dense else "sparse",
        "solver": solver,
        "discrimination": form,
        "eta": eta,
        "fit_s": round(med[0], 4),
        "setup_s": round(med[1], 4),
        "solve_s": round(med[2], 4),
        "solver_internal_s": record["solver"]["solver_time_s"],
        "transform_s_48842_rows": round(transform_s, 4),
        "n_variables": t.n_variables_,
        "dense_variables_aif360": t.dense_variables_,
        "support_rows": record["size"]["support_rows"],
        "objective_tv": round(t.objective_, 6),
        "achieved_max_additive_gap": round(disc["max_additive_gap"], 6),
        "achieved_max_ratio_gap": round(disc["max_ratio_gap"], 6),
        "input_max_additive_gap": round(disc["input_max_additive_gap"], 6),
        "input_max_ratio_gap": round(disc["input_max_ratio_gap"], 6),
        "max_excess_distortion": record["max_excess_distortion"],
        "status": t.status_,
        "within_target_s": med[0] <= TARGET_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--solvers", nargs="+", default=["CLARABEL", "HIGHS"])
    parser.add_argument("--dense-large", action="store_true",
                        help="also solve the dense 10× problem (slow, several GB)")
    args = parser.parse_args()

    start = time.perf_counter()
    import cvxpy  # noqa: F401  (timed apart: privfair.fair.tot imports it lazily, once)

    cvxpy_import_s = time.perf_counter() - start
    frame, domain = _data()
    small = ["age", "education"]
    large = ["age", "education", "hours"]
    runs = []

    def add(setup: str, **kw) -> None:
        kw.setdefault("max_variables", 5_000_000)
        result = run(frame, domain, repeat=args.repeat, **kw)
        runs.append({"setup": setup, **result})
        print(json.dumps(runs[-1]), flush=True, file=sys.stderr)

    for solver in args.solvers:
        add("calmon-adult", x_cols=small, distortion="safes-adult", eta=0.05, form="additive",
            solver=solver, dense=False)
    add("calmon-adult", x_cols=small, distortion="safes-adult", eta=0.1, form="ratio",
        solver="CLARABEL", dense=False)
    for solver in args.solvers:
        add("calmon-adult", x_cols=small, distortion="safes-adult", eta=0.05, form="additive",
            solver=solver, dense=True)
    for name, fn in (("hours-adjacent", hours_adjacent),
                     ("hours-free", "safes-adult")):
        for solver in args.solvers:
            add(f"adult-hours/{name}", x_cols=large, distortion=fn, eta=0.05,
                form="additive", solver=solver, dense=False)
    if args.dense_large:
        add("adult-hours/hours-adjacent", x_cols=large, distortion=hours_adjacent, eta=0.05,
            form="additive", solver="HIGHS", dense=True, max_variables=10_000_000)

    print(json.dumps({
        "benchmark": "tot_speed",
        "data": "UCI Adult, embedded parquet, 48,842 rows",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "target_fit_s": TARGET_S,
        "cvxpy_import_s": round(cvxpy_import_s, 3),
        "runs": runs,
    }, indent=1))


if __name__ == "__main__":
    main()
