"""TOT / optimized pre-processing (privfair.fair.tot): constraints, optimum, errors, sampling."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privfair.core.domain import Domain
from privfair.core.errors import DomainError
from privfair.fair.tot import (
    DISTORTIONS,
    InfeasibleFairnessError,
    ProblemTooLargeError,
    TOTransform,
    TOTSolverError,
    joint_distribution,
    safes_adult_distortion,
    safes_adult_text_distortion,
    safes_compas_distortion,
)

TOL = 1e-6
DOMAIN = Domain(("d", "x", "y"), (2, 2, 2))


def tiny_distortion(old, new):
    """3 if x changes (forbidden at c=2.99, bound 0), 1 if y changes."""
    return 3.0 * (old["x"] != new["x"]) + 1.0 * (old["y"] != new["y"])


def frame_from(p: np.ndarray, n: int = 10_000) -> pd.DataFrame:
    """A frame whose empirical (d, x, y) distribution is exactly ``p`` (n·p must be integral)."""
    counts = np.rint(p.reshape(-1) * n).astype(int)
    assert counts.sum() == n
    cells = np.repeat(np.arange(p.size), counts)
    d, x, y = np.unravel_index(cells, p.shape)
    return pd.DataFrame({"d": d, "x": x, "y": y})


def unfair_p() -> np.ndarray:
    # p(d) = 1/2, x == d, p(y=1 | d=0) = 0.2, p(y=1 | d=1) = 0.6.
    p = np.zeros((2, 2, 2))
    p[0, 0] = [0.4, 0.1]
    p[1, 1] = [0.2, 0.3]
    return p


def make(eta: float, **kw) -> TOTransform:
    kw.setdefault("distortion", tiny_distortion)
    kw.setdefault("clist", (0.99, 2.99))
    kw.setdefault("dlist", (0.5, 0.0))
    return TOTransform(d_cols="d", x_cols="x", y_col="y", domain=DOMAIN, eta=eta, **kw)


def dense_map(t: TOTransform, n_d: int, n_xy: int) -> np.ndarray:
    """q[d, xy, xy~] from the public long table (zero-mass rows: identity)."""
    q = np.zeros((n_d, n_xy, n_xy))
    q[:, np.arange(n_xy), np.arange(n_xy)] = 1.0
    m = t.map_frame()
    layout = t.layout_
    d = np.ravel_multi_index(tuple(m[c] for c in layout.d_cols), layout.d_shape)
    x_shape = (*layout.x_shape, layout.n_y)
    src = np.ravel_multi_index(tuple(m[c] for c in (*layout.x_cols, layout.y_col)), x_shape)
    tgt = np.ravel_multi_index(tuple(m[f"{c}~"] for c in (*layout.x_cols, layout.y_col)),
                               x_shape)
    q[d, src] = 0.0
    np.add.at(q, (d, src, tgt), m["probability"].to_numpy())
    return q


def check_constraints(t: TOTransform, p: np.ndarray, distortion, clist, dlist, eta, form):
    """Verify every constraint exactly from the map; return (q(ŷ|d), TV objective)."""
    n_d, n_x, n_y = p.shape
    n_xy = n_x * n_y
    q = dense_map(t, n_d, n_xy)
    assert np.all(q >= 0)
    np.testing.assert_allclose(q.sum(axis=2), 1.0, atol=1e-12)
    pf = p.reshape(n_d, n_xy)
    # Distortion: on every (d, x, y) with mass.
    layout = t.layout_
    src = layout.decode_xy(np.arange(n_xy))
    delta = np.broadcast_to(distortion({k: v[:, None] for k, v in src.items()},
                                       {k: v[None, :] for k, v in src.items()}), (n_xy, n_xy))
    for c, bound in zip(clist, dlist, strict=True):
        excess = (q * (delta >= c)[None]).sum(axis=2)
        assert np.all(excess[pf > 0] <= bound + TOL), (c, bound, excess.max())
    # Discrimination.
    p_d = pf.sum(axis=1)
    joint = np.einsum("ds,dst->dt", pf, q).reshape(n_d, n_x, n_y).sum(axis=1)
    cond = joint[p_d > 0] / p_d[p_d > 0, None]
    for a in range(len(cond)):
        for b in range(len(cond)):
            if form == "additive":
                assert np.all(np.abs(cond[a] - cond[b]) <= eta + TOL)
            else:
                assert np.all(cond[a] <= (1 + eta) * cond[b] + TOL)
    marginal = np.einsum("ds,dst->t", pf, q)
    tv = 0.5 * np.abs(marginal - pf.sum(axis=0)).sum()
    return cond, tv


# --- optimum and constraints ---------------------------------------------------------------


def test_already_fair_data_has_zero_objective():
    p = np.einsum("d,xy->dxy", [0.5, 0.5], [[0.3, 0.2], [0.1, 0.4]])
    t = make(0.0).fit(frame_from(p))
    assert t.objective_ == pytest.approx(0.0, abs=1e-7)
    cond, tv = check_constraints(t, p, tiny_distortion, (0.99, 2.99), (0.5, 0.0), 0.0,
                                 "additive")
    assert tv == pytest.approx(0.0, abs=1e-7)
    assert t.discrimination_["input_max_additive_gap"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("solver", ["CLARABEL", "HIGHS"])
def test_additive_optimum_by_hand(solver):
    # x is pinned (x-changes forbidden), so TV = (|a - 0.2| + |b - 0.6|)/2 with b - a <= 0.1:
    # the optimum closes 0.3 of the 0.4 gap -> TV 0.15, constraint tight.
    p = unfair_p()
    t = make(0.1, solver=solver).fit(frame_from(p))
    cond, tv = check_constraints(t, p, tiny_distortion, (0.99, 2.99), (0.5, 0.0), 0.1,
                                 "additive")
    assert t.objective_ == pytest.approx(0.15, abs=1e-6)
    assert tv == pytest.approx(t.objective_, abs=1e-9)
    assert cond[1, 1] - cond[0, 1] == pytest.approx(0.1, abs=1e-6)  # tight
    assert t.discrimination_["max_additive_gap"] == pytest.approx(0.1, abs=1e-6)
    assert t.discrimination_["input_max_additive_gap"] == pytest.approx(0.4)
    assert t.status_ == "optimal"


def test_ratio_optimum_by_hand():
    # Ratio form (SAFES eq. 8): a, b = q(ŷ=1 | d); b <= 1.25 a and (1 - a) <= 1.25 (1 - b).
    # Minimising (a - 0.2) + (0.6 - b) gives a = 4/9, b = 5/9 -> TV = (0.4 - 1/9)/2 = 13/90.
    p = unfair_p()
    t = make(0.25, discrimination="ratio").fit(frame_from(p))
    cond, _ = check_constraints(t, p, tiny_distortion, (0.99, 2.99), (0.5, 0.0), 0.25, "ratio")
    assert t.objective_ == pytest.approx(13 / 90, abs=1e-6)
    np.testing.assert_allclose(cond[:, 1], [4 / 9, 5 / 9], atol=1e-5)
    assert t.discrimination_["max_ratio_gap"] == pytest.approx(0.25, abs=1e-5)


def test_distortion_bound_is_respected():
    # A 0.2 cap on changing y: group 0 can reach at most a = 0.2 + 0.8·0.2 = 0.36 and group 1
    # at least b = 0.6·0.8 = 0.48, so eta = 0.15 is feasible only with the cap nearly used.
    p = unfair_p()
    t = make(0.15, dlist=(0.2, 0.0)).fit(frame_from(p))
    check_constraints(t, p, tiny_distortion, (0.99, 2.99), (0.2, 0.0), 0.15, "additive")
    assert max(t.excess_distortion_.values()) <= 0.2 + TOL


def test_safes_adult_multi_group_constraints_hold():
    rng = np.random.default_rng(5)
    domain = Domain(("race", "sex", "age", "education", "income"), (2, 2, 7, 8, 2))
    n = 4000
    frame = pd.DataFrame({c: rng.integers(0, s, n) for c, s in domain.items()})
    # Make income depend on the group so there is something to fix.
    frame["income"] = (rng.random(n) < 0.15 + 0.3 * frame["sex"] * frame["race"]).astype(int)
    for form, eta in (("additive", 0.05), ("ratio", 0.2)):
        t = TOTransform(d_cols=["race", "sex"], x_cols=["age", "education"], y_col="income",
                        domain=domain, eta=eta, discrimination=form).fit(frame)
        p = joint_distribution(frame, domain, ["race", "sex"], ["age", "education"], "income")
        check_constraints(t, p, safes_adult_distortion, (0.99, 1.99, 2.99), (0.1, 0.05, 0.0),
                          eta, form)
        assert t.objective_ > 0


# --- errors ----------------------------------------------------------------------------


def test_infeasible_eta_names_discrimination():
    # Cap 0.1 on y-changes: a <= 0.28, b >= 0.54 -> a gap of 0.26 is the best possible.
    with pytest.raises(InfeasibleFairnessError, match="discrimination") as info:
        make(0.1, dlist=(0.1, 0.0)).fit(frame_from(unfair_p()))
    assert info.value.family == "discrimination"
    assert info.value.checks["discrimination"] is True
    assert info.value.checks["distortion bounds (dlist > 0)"] is True


def test_infeasible_distortion_alone_names_distortion():
    def costly(old, new):  # every transition, even the identity, costs 1
        return 1.0 + tiny_distortion(old, new)

    with pytest.raises(InfeasibleFairnessError) as info:
        make(0.5, distortion=costly).fit(frame_from(unfair_p()))
    assert info.value.family == "distortion"
    # Forbidding the identity too leaves rows without any transition: caught before solving.
    with pytest.raises(InfeasibleFairnessError) as info:
        make(0.5, distortion=costly, clist=(0.99,), dlist=(0.0,)).fit(frame_from(unfair_p()))
    assert info.value.family == "distortion"


def test_too_large_is_refused_before_allocation():
    domain = Domain(("d", "a", "b", "y"), (2, 1000, 1000, 2))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"d": rng.integers(0, 2, 500), "a": rng.integers(0, 1000, 500),
                          "b": rng.integers(0, 1000, 500), "y": rng.integers(0, 2, 500)})
    start = time.perf_counter()
    with pytest.raises(ProblemTooLargeError, match="max_variables=5,000,000") as info:
        TOTransform(d_cols="d", x_cols=["a", "b"], y_col="y", domain=domain, eta=0.1,
                    distortion=lambda o, n: np.zeros(1)).fit(frame)
    assert time.perf_counter() - start < 2.0
    rows = len(frame.drop_duplicates())
    assert info.value.n_variables == rows * 2_000_000  # upper bound: support rows × |X×Y|
    assert f"{rows * 2_000_000:,}" in str(info.value)
    assert info.value.dense_variables == 2 * 2_000_000 * 2_000_000


def test_too_large_reports_exact_sparse_size():
    # Each of the 4 support rows may keep or flip y (x is pinned): 8 variables.
    with pytest.raises(ProblemTooLargeError, match="has 8 variables") as info:
        make(0.1, max_variables=7).fit(frame_from(unfair_p()))
    assert info.value.n_variables == 8
    assert make(0.1, max_variables=8).fit(frame_from(unfair_p())).n_variables_ == 8


def test_inaccurate_solution_missing_a_constraint_is_refused():
    # SCS stopped after 5 iterations: cvxpy's "inaccurate" warning is absorbed into the status,
    # and the map, checked exactly, misses eta -> a typed error rather than a silent result.
    with pytest.raises(TOTSolverError, match="misses the discrimination constraint"):
        make(0.1, solver="SCS", solver_options={"max_iters": 5},
             fallback_solver=None).fit(frame_from(unfair_p()))


def test_a_failed_solver_falls_back_to_highs_and_says_so():
    # the same truncated SCS run, with the default fallback: HiGHS solves the program and
    # the fit reaches the hand-computed optimum; the manifest names both
    t = make(0.1, solver="SCS", solver_options={"max_iters": 5}).fit(frame_from(unfair_p()))
    assert t.objective_ == pytest.approx(0.15, abs=1e-6)
    assert t.discrimination_["max_additive_gap"] <= 0.1 + 1e-6
    assert len(t.solver_failures_) == 1 and "SCS" in t.solver_failures_[0]
    solver = t.to_manifest()["solver"]
    assert solver["name"] == "HIGHS" and solver["failed_before"] == t.solver_failures_
    assert make(0.1).fit(frame_from(unfair_p())).solver_failures_ == []
    with pytest.raises(ValueError, match="fallback_solver"):
        make(0.1, fallback_solver="NOPE").fit(frame_from(unfair_p()))


def test_bad_parameters_are_refused():
    frame = frame_from(unfair_p())
    with pytest.raises(ValueError, match="discrimination"):
        make(0.1, discrimination="difference").fit(frame)
    with pytest.raises(ValueError, match="one bound per threshold"):
        make(0.1, dlist=(0.1,)).fit(frame)
    with pytest.raises(ValueError, match="unknown distortion"):
        make(0.1, distortion="nope").fit(frame)
    with pytest.raises(ValueError, match="eta"):
        make(-0.1).fit(frame)
    with pytest.raises(ValueError, match="solver"):
        make(0.1, solver="NOPE").fit(frame)
    with pytest.raises(DomainError, match="outside the declared domain"):
        make(0.1).fit(frame.assign(x=frame["x"] + 1))


# --- sampling --------------------------------------------------------------------------------


def test_transform_is_reproducible_and_matches_the_map():
    p = unfair_p()
    frame = frame_from(p, n=20_000)
    t = make(0.1).fit(frame)
    a = t.transform(frame, rng=np.random.default_rng(42))
    b = t.transform(frame, rng=np.random.default_rng(42))
    c = t.transform(frame, rng=np.random.default_rng(43))
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    assert (a["d"] == frame["d"]).all()
    assert list(a.dtypes) == list(frame.dtypes)
    # Pooled chi-square over each source (d, x, y) given its row count and q(· | d, x, y).
    q = dense_map(t, 2, 4)
    src = frame["d"].to_numpy() * 4 + frame["x"].to_numpy() * 2 + frame["y"].to_numpy()
    tgt = a["x"].to_numpy() * 2 + a["y"].to_numpy()
    observed = np.zeros((8, 4))
    np.add.at(observed, (src, tgt), 1)
    expected = observed.sum(axis=1, keepdims=True) * q.reshape(8, 4)
    assert np.all(observed[expected == 0] == 0)
    live = expected > 0
    statistic = ((observed[live] - expected[live]) ** 2 / expected[live]).sum()
    dof = int(live.sum() - (observed.sum(axis=1) > 0).sum())
    assert stats.chi2.sf(statistic, dof) > 1e-3


def test_unseen_levels_use_the_identity_fallback():
    domain = Domain(("d", "x", "y"), (3, 3, 2))  # d=2 and x=2 never occur at fit time
    frame = frame_from(unfair_p())
    t = TOTransform(d_cols="d", x_cols="x", y_col="y", domain=domain, eta=0.1,
                    distortion=tiny_distortion, clist=(0.99, 2.99), dlist=(0.5, 0.0)).fit(frame)
    new = pd.DataFrame({"d": [2, 2, 0, 1], "x": [2, 0, 2, 0], "y": [1, 0, 1, 1]})
    out = t.transform(new, rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(out, new)
    with pytest.raises(DomainError):
        t.transform(new.assign(x=[3, 0, 0, 0]), rng=np.random.default_rng(0))


# --- sizes, distortions, manifest ------------------------------------------------------------


def test_sparse_variables_on_calmon_adult_domain():
    # Every (d, x, y) cell present: 4 groups × 7 ages × 8 educations × 2 incomes.
    domain = Domain(("race", "sex", "age", "education", "income"), (2, 2, 7, 8, 2))
    grid = np.indices(domain.sizes).reshape(len(domain), -1).T
    frame = pd.DataFrame(grid, columns=list(domain))
    t = TOTransform(d_cols=["race", "sex"], x_cols=["age", "education"], y_col="income",
                    domain=domain, eta=0.05, max_variables=4560)
    t.fit(frame)
    # Allowed per source: age stays or moves one decade (19 over the 7 ages), education
    # stays or rises one level (15 over the 8), any income (2 per source income).
    assert t.n_variables_ == 4 * 19 * 15 * 4 == 4560
    assert t.dense_variables_ == 448 * 112
    assert t.n_variables_ < 0.1 * t.dense_variables_


def test_registered_distortions():
    assert set(DISTORTIONS) >= {"safes-adult", "safes-compas"}
    old = {"age": np.array([3]), "education": np.array([4]), "income": np.array([1])}

    def at(fn, **new):
        return float(fn(old, {**old, **{k: np.array([v]) for k, v in new.items()}})[0])

    assert at(safes_adult_distortion) == 0.0
    assert at(safes_adult_distortion, education=5) == 0.0
    assert at(safes_adult_distortion, education=3) == 3.0
    assert at(safes_adult_text_distortion, education=3) == 0.0
    assert at(safes_adult_distortion, education=6) == 3.0
    assert at(safes_adult_distortion, age=5) == 3.0
    assert at(safes_adult_distortion, age=2) == 2.0
    assert at(safes_adult_distortion, income=0) == 1.0
    assert at(safes_adult_distortion, age=4, income=0) == 2.0
    compas = {"age_cat": np.array([0]), "priors_count": np.array([1]),
              "c_charge_degree": np.array([0]), "two_year_recid": np.array([0])}

    def cat(**new):
        return float(safes_compas_distortion(compas, {**compas, **{
            k: np.array([v]) for k, v in new.items()}})[0])

    assert cat() == 0.0
    assert cat(age_cat=1) == 1.0 and cat(age_cat=2) == 2.0
    assert cat(priors_count=0) == 1.0
    assert cat(c_charge_degree=1) == 1.0  # felony -> misdemeanor
    assert float(safes_compas_distortion({**compas, "c_charge_degree": np.array([1])},
                                         compas)[0]) == 2.0
    assert cat(two_year_recid=1, age_cat=1) == 3.0


def test_manifest_is_json_and_complete():
    t = make(0.1).fit(frame_from(unfair_p()))
    manifest = json.loads(json.dumps(t.to_manifest()))
    assert manifest["privacy"]["additional_privacy_cost"] == 0.0
    assert manifest["solver"]["status"] == "optimal"
    assert manifest["objective_tv"] == pytest.approx(0.15, abs=1e-6)
    assert manifest["achieved_discrimination"]["max_additive_gap"] <= 0.1 + TOL
    assert manifest["parameters"]["eta"] == 0.1
    assert manifest["size"]["n_variables"] == 8


def test_joint_distribution_and_supplied_target():
    frame = frame_from(unfair_p())
    p = joint_distribution(frame, DOMAIN, "d", "x", "y")
    np.testing.assert_allclose(p, unfair_p())
    same = make(0.1, target=p.sum(axis=0)).fit_distribution(p)
    assert same.objective_ == pytest.approx(0.15, abs=1e-6)
