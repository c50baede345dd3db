import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from privfair import Domain, Roles, synthesize
from privfair.core.errors import DomainError, RoleError

ROLES = {"protected": ["sex"], "admissible": ["edu"], "outcome": ["income"]}
SIZES = {"sex": 2, "age": 4, "edu": 3, "income": 2}


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    age = rng.integers(0, 4, n)
    edu = np.clip(sex + rng.integers(0, 2, n), 0, 2)
    income = (rng.random(n) < 0.2 + 0.3 * (edu == 2) + 0.2 * sex).astype(np.int64)
    return pd.DataFrame({"sex": sex, "age": age, "edu": edu, "income": income})


@pytest.mark.parametrize("method", ["mst", "prefair-greedy", "prefair-exact"])
def test_synthesize_returns_declared_columns_and_an_auditable_manifest(method):
    out = synthesize(_data(), SIZES, ROLES, epsilon=2.0, delta=1e-6, method=method,
                     seed=987654321)
    assert list(out.data.columns) == list(SIZES)
    for column, size in SIZES.items():
        assert out.data[column].between(0, size - 1).all()
    manifest = json.loads(json.dumps(out.manifest))
    spent = sum(e["rho"] for e in manifest["ledger"])
    assert spent <= manifest["guarantee"]["rho"] * (1 + 1e-9)
    assert spent == pytest.approx(manifest["guarantee"]["rho"])
    assert manifest["guarantee"]["spent"]["epsilon"] <= 2.0 + 1e-6
    # a spanning tree or a forest: the selection may stop early (issue 34.1); with exact noise
    # (issue 41.2) this seed's mst stops at 2 of 3 edges
    assert 1 <= len(manifest["structure"]["edges"]) <= len(SIZES) - 1
    if method != "mst":
        assert manifest["fairness_check"]["passed"]
    # No raw n: the default row count is the noisy estimate.
    assert manifest["method"]["estimated_total"] != 4000
    # Whoever knows the seed can strip the noise: it must not be published.
    assert "987654321" not in json.dumps(manifest)


def test_same_seed_same_release_and_different_seed_differs():
    a = synthesize(_data(), SIZES, ROLES, epsilon=1.0, delta=1e-6, seed=9, n_rows=500)
    b = synthesize(_data(), SIZES, ROLES, epsilon=1.0, delta=1e-6, seed=9, n_rows=500)
    c = synthesize(_data(), SIZES, ROLES, epsilon=1.0, delta=1e-6, seed=10, n_rows=500)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert not a.data.equals(c.data)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"delta": 0.0}, ValueError, "delta"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"method": "prefair-optimal"}, ValueError, "method"),
        ({"roles": {"protected": ["sex"], "admissible": ["sex"], "outcome": ["income"]}},
         RoleError, "disjoint"),
        ({"roles": {"protected": ["sex"], "outcome": ["income"]}, "method": "prefair-greedy"},
         RoleError, "admissible set is empty"),
        ({"roles": {"protected": ["sex"], "admissible": ["nope"], "outcome": ["income"]}},
         RoleError, "not in the domain"),
        ({"data": _data().assign(edu=lambda d: d.edu + 1)}, DomainError,
         "column 'edu': codes outside the declared domain 0..2"),
        ({"data": _data().drop(columns="age")}, DomainError, "missing columns"),
        ({"data": _data().assign(age=lambda d: d.age.astype(float))}, DomainError,
         "expected integer codes"),
        ({"sample_mode": "sorted"}, ValueError, "sample_mode"),
    ],
)
def test_bad_arguments_are_refused_clearly(kwargs, error, message):
    args = {"data": _data(), "domain": SIZES, "roles": ROLES, "epsilon": 1.0, "delta": 1e-6,
            "method": "prefair-greedy", "seed": 0}
    args.update(kwargs)
    with pytest.raises(error, match=message):
        synthesize(**args)


def test_streamed_batches_give_the_same_release_as_one_frame():
    frame = _data()
    halves = [frame.iloc[:2000], frame.iloc[2000:]]

    def batches():
        return ({c: h[c].to_numpy() for c in h.columns} for h in halves)

    one = synthesize(frame, SIZES, ROLES, epsilon=1.0, delta=1e-6, seed=4, n_rows=300)
    two = synthesize(batches, SIZES, ROLES, epsilon=1.0, delta=1e-6, seed=4, n_rows=300)
    pd.testing.assert_frame_equal(one.data, two.data)


def test_outcome_is_independent_of_protected_given_its_neighbours_in_synthetic_data():
    from scipy import stats

    out = synthesize(_data(20_000), SIZES, ROLES, epsilon=5.0, delta=1e-6,
                     method="prefair-greedy", seed=1, n_rows=20_000)
    edges = out.manifest["structure"]["edges"]
    nbrs = sorted({b if a == "income" else a for a, b in edges if "income" in (a, b)})
    frame = out.data
    g, dof = 0.0, 0
    for _, stratum in frame.groupby(nbrs):
        table = pd.crosstab(stratum["income"], stratum["sex"]).to_numpy()
        if table.shape != (2, 2):
            continue
        expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
        nz = table > 0
        g += 2 * (table[nz] * np.log(table[nz] / expected[nz])).sum()
        dof += 1
    assert stats.chi2.sf(g, dof) > 0.001


def test_library_imports_without_prefect_torch_or_great_expectations():
    code = ("import sys, privfair, privfair.synth.synthesizer; "
            "bad = [m for m in ('prefect', 'torch', 'great_expectations') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_domain_and_roles_value_types():
    domain = Domain.from_dict(SIZES)
    assert domain.cells(["sex", "edu"]) == 6
    assert domain.canonical(["income", "sex"]) == ("sex", "income")
    roles = Roles.from_dict(ROLES)
    assert roles.free(domain) == ("age",)
    with pytest.raises(RoleError, match="unknown role names"):
        Roles.from_dict({"protect": ["sex"]})
